"""What every concern shares: the Violation record."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Violation:
    """A broken hard rule: which rule, where (job/group/replica/node), and the numbers."""

    rule: str
    message: str
    job: str | None = None
    group: str | None = None
    replica: int | None = None
    node: str | None = None
    values: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        where = "/".join(str(x) for x in (self.job, self.group, self.replica) if x is not None)
        on = f" on {self.node}" if self.node else ""
        return f"[{self.rule}] {where}{on}: {self.message}"
