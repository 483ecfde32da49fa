"""`optsched.sim.gorand` draws what Go's math/rand draws (`Int` is `Int63` on 64 bits). The expected values were printed by Go
1.19.8 (`rand.Seed(seed)`, then the calls below in this order, on linux/amd64):

    rand.Seed(seed); a := rand.Int(); b := rand.Intn(8152); c := rand.Intn(1 << 20)
    d := rand.Int63(); e := rand.Uint32(); p := rand.Perm(10)
    s := []int{0, ..., 11}; rand.Shuffle(len(s), swap); f := rand.Intn(3)
"""

from __future__ import annotations

import pytest

from optsched.sim.gorand import GoRand

GO = {
    42: (3440579354231278675, 4315, 193156, 1926012586526624009, 188198846, [3, 5, 9, 6, 8, 1, 4, 7, 0, 2],
         [11, 3, 4, 6, 1, 2, 0, 9, 8, 10, 7, 5], 2),
    51: (3893522058333705853, 1647, 776128, 6360690084447539553, 3166863128, [4, 8, 2, 7, 0, 9, 6, 5, 3, 1],
         [8, 9, 7, 0, 1, 4, 2, 5, 10, 11, 3, 6], 2),
    0: (8717895732742165505, 1802, 417785, 501233450539197794, 1578775030, [5, 1, 9, 8, 0, 3, 6, 4, 7, 2],
        [4, 1, 11, 9, 5, 10, 2, 6, 7, 0, 8, 3], 1),
    -7: (747107023976529931, 2032, 378962, 814608651260322299, 1296011127, [8, 4, 1, 3, 0, 7, 9, 5, 2, 6],
         [2, 5, 8, 10, 7, 4, 0, 6, 11, 1, 3, 9], 0),
    1 << 40: (5470237361722394362, 5744, 471249, 1565541666764780662, 3574393691, [6, 2, 9, 5, 7, 0, 4, 1, 3, 8],
              [3, 0, 4, 7, 10, 11, 2, 5, 6, 8, 9, 1], 0),
}


@pytest.mark.parametrize("seed", sorted(GO))
def test_the_stream_is_go_s(seed: int) -> None:
    r = GoRand(seed)
    got = (r.int63(), r.intn(8152), r.intn(1 << 20), r.int63(), r.uint32(), r.perm(10), r.shuffle_indices(12),
           r.intn(3))
    assert got == GO[seed]


def test_a_long_stream_stays_go_s() -> None:
    """`rand.Seed(42)`; the sum of `rand.Intn(1213 + i % 7)` for i < 100,000; then `rand.Perm(1213)`
    at 0, 600 and 1212 (Go: 60814009, 752, 903, 113)."""
    r = GoRand(42)
    assert sum(r.intn(1213 + i % 7) for i in range(100_000)) == 60814009
    p = r.perm(1213)
    assert (p[0], p[600], p[1212]) == (752, 903, 113)
    assert sorted(p) == list(range(1213))


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError):
        GoRand(1).intn(0)
