"""Go's math/rand, value for value: the stream the FGD artifact draws from (issue 23).

The FGD simulator (hkust-adsl/kubernetes-scheduler-simulator, Go) seeds the package-level source
with `rand.Seed(seed)` and then shuffles the trace, inflates it and names its nodes from that one
stream (`optsched.sim.artifact`). Reproducing its per-seed numbers needs the same stream, so this
module is a port of Go's seeded source (Mitchell-Reeds additive lagged Fibonacci generator, 607
words, tap 273, seeded by a Lehmer generator XORed with `gorand_table.COOKED`) and of the `Rand`
methods the artifact calls: `Int63` (= `Int`), `Uint32`, `Int31`, `Float64`, `Int63n`, `Int31n`, `Intn`, `Perm`
and `Shuffle` (with its own Lemire-style `int31n`). tests/test_gorand.py pins values printed by Go
1.19 itself.

Plain Python integers (64-bit two's complement emulated with masks): the artifact draws a few tens
of thousands of values per run, well under a second here.
"""

from __future__ import annotations

from collections.abc import Callable

from optsched.sim.gorand_table import COOKED

LEN = 607
TAP = 273
INT32_MAX = (1 << 31) - 1
MASK64 = (1 << 64) - 1
MASK63 = (1 << 63) - 1
MASK32 = (1 << 32) - 1


def _seedrand(x: int) -> int:
    """One step of x -> 48271 x mod (2^31 - 1), as Go computes it (Schrage's method)."""
    hi, lo = divmod(x, 44488)
    x = 48271 * lo - 3399 * hi
    return x + INT32_MAX if x < 0 else x


class GoRand:
    """A `rand.New(rand.NewSource(seed))`, or the package-level source after `rand.Seed(seed)`."""

    def __init__(self, seed: int) -> None:
        self.vec = [0] * LEN
        self.seed(seed)

    def seed(self, seed: int) -> None:
        """`rngSource.Seed`: Go's int64 remainder (the sign of the dividend), 0 -> 89482311."""
        self.tap = 0
        self.feed = LEN - TAP
        seed = -(-seed % INT32_MAX) if seed < 0 else seed % INT32_MAX
        if seed < 0:
            seed += INT32_MAX
        if seed == 0:
            seed = 89482311
        x = seed
        for i in range(-20, LEN):
            x = _seedrand(x)
            if i >= 0:
                u = (x << 40) & MASK64
                x = _seedrand(x)
                u ^= (x << 20) & MASK64
                x = _seedrand(x)
                u ^= x
                u ^= COOKED[i] & MASK64
                self.vec[i] = u

    def uint64(self) -> int:
        """`rngSource.Uint64`: the next word (unsigned)."""
        self.tap -= 1
        if self.tap < 0:
            self.tap += LEN
        self.feed -= 1
        if self.feed < 0:
            self.feed += LEN
        x = (self.vec[self.feed] + self.vec[self.tap]) & MASK64
        self.vec[self.feed] = x
        return x

    def int63(self) -> int:
        """`Rand.Int63`, and `Rand.Int` on a 64-bit platform (the same draw)."""
        return self.uint64() & MASK63

    def uint32(self) -> int:
        return self.int63() >> 31

    def int31(self) -> int:
        return self.int63() >> 32

    def float64(self) -> float:
        """`Rand.Float64`: Int63 / 2^63, drawn again in the (2^-53) case that rounds to 1.0."""
        while True:
            f = self.int63() / (1 << 63)
            if f != 1.0:
                return f

    def int63n(self, n: int) -> int:
        """`Rand.Int63n`."""
        return self._below(n, self.int63, 63)

    def int31n(self, n: int) -> int:
        """`Rand.Int31n` (`Intn` below 2^31 is this)."""
        return self._below(n, self.int31, 31)

    @staticmethod
    def _below(n: int, draw: Callable[[], int], bits: int) -> int:
        """Go's rejection sampling over `bits`-bit draws: a mask for a power of two, else draws
        above the largest multiple of n are drawn again."""
        if n <= 0:
            raise ValueError("n must be positive")
        if n & (n - 1) == 0:
            return draw() & (n - 1)
        most = (1 << bits) - 1 - (1 << bits) % n
        v = draw()
        while v > most:
            v = draw()
        return v % n

    def intn(self, n: int) -> int:
        return self.int31n(n) if n <= INT32_MAX else self.int63n(n)

    def _int31n_lemire(self, n: int) -> int:
        """The unexported `int31n` that `Shuffle` uses (multiply and shift, not the modulo)."""
        prod = self.uint32() * n
        low = prod & MASK32
        if low < n:
            thresh = ((1 << 32) - n) % n
            while low < thresh:
                prod = self.uint32() * n
                low = prod & MASK32
        return prod >> 32

    def perm(self, n: int) -> list[int]:
        """`Rand.Perm`: m[i] = m[j]; m[j] = i for j = Intn(i + 1), i = 0..n-1."""
        m = [0] * n
        for i in range(n):
            j = self.intn(i + 1)
            m[i] = m[j]
            m[j] = i
        return m

    def shuffle_indices(self, n: int) -> list[int]:
        """`Rand.Shuffle(n, swap)` applied to [0, n): Fisher-Yates from the top, j = int31n(i + 1)."""
        out = list(range(n))
        for i in range(n - 1, 0, -1):
            j = self.int63n(i + 1) if i > INT32_MAX - 1 else self._int31n_lemire(i + 1)
            out[i], out[j] = out[j], out[i]
        return out


__all__ = ["GoRand"]
