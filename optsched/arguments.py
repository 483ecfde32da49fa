"""Checks of the call arguments the entry points share (time limits, seeds), at the door.

A time limit that is NaN, infinite, zero or negative, or a seed CP-SAT cannot take, used to reach
a solver (a traceback from a cast deep inside, or every job deferred without a word); `solve`,
`bound`, `pareto` and `plan_capacity` now refuse them with an `InputError` naming the argument.
"""

from __future__ import annotations

import math

from optsched.errors import InputError, InputIssue

MAX_TIME_LIMIT_S = 86_400.0
"""Longest time limit (s) a call may be given: a day (a scheduling round takes seconds)."""
MAX_SEED = 2**30
"""Largest seed: CP-SAT's `random_seed` is an int32, and the steps of a round use seed + step."""


def require_time_limit(value: object, field: str = "time_limit") -> float:
    """`value` as seconds: a finite number with 0 < value <= MAX_TIME_LIMIT_S, else InputError."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError([InputIssue(field, "type", f"{value!r} is not a number of seconds")])
    seconds = float(value)
    if not math.isfinite(seconds) or seconds <= 0 or seconds > MAX_TIME_LIMIT_S:
        raise InputError([InputIssue(field, "out_of_range",
                                     f"{value!r}: a time limit is finite, > 0 and <= {MAX_TIME_LIMIT_S:g} s")])
    return seconds


def require_seed(value: object, field: str = "seed") -> int:
    """`value` as a seed: an integer with 0 <= value <= MAX_SEED, else InputError."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError([InputIssue(field, "type", f"{value!r} is not an integer")])
    if not 0 <= value <= MAX_SEED:
        raise InputError([InputIssue(field, "out_of_range", f"{value}: a seed is within 0..{MAX_SEED}")])
    return value
