"""Keep Python's cyclic garbage collector out of a round's time limit.

A full (generation 2) collection walks every live object, and with a compiled 10,000-GPU round in
memory one landing inside a 0.2 s round made it overrun by half (0.30 s wall on mixed-cloud-10k
with 1,000 jobs: benchmarks/results/cpsat.md as of commit 43c5d9c; a profile put the collections
inside those rounds). Rounds create little cyclic garbage
(their objects are freed by reference counting), so the collector is paused for the duration of
a solve and resumed, in the state it was found, when the solve returns; a collection the round
postponed then runs outside its clock.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from types import TracebackType
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


class gc_paused:
    """Pause the cyclic garbage collector inside a `with` block (re-entrant; restores its state).

    A class rather than a `contextlib.contextmanager` generator on purpose: the generator's exit
    allocates a StopIteration right after the collector is re-enabled, and with the allocations
    counted while it was paused that triggers the full collection inside the block's clock.
    """

    def __enter__(self) -> None:
        self.was_enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if self.was_enabled:
            gc.enable()


def without_gc(func: Callable[P, R]) -> Callable[P, R]:
    """`func` with the collector paused while it runs (a fresh `gc_paused` per call, so calls from
    several threads restore it correctly): for work that makes no cyclic garbage over a large
    round, such as reading a cluster's objects or compiling a problem."""

    @functools.wraps(func)
    def paused(*args: P.args, **kwargs: P.kwargs) -> R:
        with gc_paused():
            return func(*args, **kwargs)

    return paused
