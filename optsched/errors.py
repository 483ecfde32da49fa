"""Typed errors for bad input.

Every problem found in an input document is collected (not just the first) and reported with
the field path where it lives and the rule it breaks, so that a platform team can fix a cluster
or queue document in one pass.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class InputIssue:
    """One thing wrong with an input document.

    Attributes
    ----------
    path:
        Field path in the document, e.g. ``nodes[3].devices.model``.
    rule:
        Short name of the rule broken, e.g. ``unknown_reference`` or ``duplicate_id``.
    message:
        What is wrong, with the offending values.
    """

    path: str
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: [{self.rule}] {self.message}"


class InputError(ValueError):
    """Raised when a cluster, queue or plan document is invalid; lists every problem found."""

    def __init__(self, problems: list[InputIssue]) -> None:
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{len(self.problems)} input problem(s):\n{lines}")

    def __reduce__(self) -> tuple[type[InputError], tuple[list[InputIssue]]]:
        """Pickled with its problems (a round solved in a worker process raises it back whole)."""
        return (InputError, (self.problems,))
