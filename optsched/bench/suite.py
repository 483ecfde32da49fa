"""Suites as data: clusters x workloads x solvers x seeds x time limits, read from YAML.

A suite file (docs/bench.md):

```yaml
name: rounds            # results go to <out>/<name>.md and <name>.csv
kind: rounds            # rounds | fgd | philly (optsched.bench.kinds)
clusters: [dgx-h100-1k] # reference cluster names (optsched/data/clusters, `optsched.bundled`) or paths
workloads:              # kind-specific parameters, one case per entry
  - {mix: mixed, load: 2.0, jobs: 300}
solvers: [best-fit, volcano, cpsat]
seeds: [0, 1, 2]
time_limits: [2.0]
```
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from optsched.errors import InputError, InputIssue
from optsched.model.io import problems_from_validation

SUITES_DIR = Path(__file__).parent / "suites"
"""The suites shipped with optsched: fgd, rounds, philly."""


class Case(BaseModel):
    """One run of a suite: what `optsched.bench.kinds.run_case` needs (picklable, for workers)."""

    model_config = ConfigDict(frozen=True)

    kind: str
    cluster: str
    workload: dict[str, Any]
    solver: str
    seed: int
    time_limit: float


class Suite(BaseModel):
    """A benchmark suite (module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    kind: Literal["rounds", "fgd", "philly"]
    clusters: list[str] = Field(default_factory=lambda: [""])
    workloads: list[dict[str, Any]] = Field(default_factory=lambda: [dict[str, Any]()])
    solvers: list[str] = Field(min_length=1)
    seeds: list[int] = Field(default_factory=lambda: [0])
    time_limits: list[float] = Field(default_factory=lambda: [1.0])
    description: str = ""

    def cases(self, seeds: int | None = None) -> list[Case]:
        """Every combination; `seeds` replaces the seed list by that many, from its first seed."""
        chosen = self.seeds if seeds is None else list(range(self.seeds[0], self.seeds[0] + seeds))
        return [Case(kind=self.kind, cluster=c, workload=w, solver=s, seed=seed, time_limit=t)
                for c, w, s, t, seed in itertools.product(self.clusters, self.workloads, self.solvers,
                                                          self.time_limits, chosen)]


def suite_names() -> list[str]:
    """The shipped suites."""
    return sorted(p.stem for p in SUITES_DIR.glob("*.yaml"))


def load_suite(name_or_path: str | Path) -> Suite:
    """A shipped suite by name, or a suite file; `InputError` names the field and the rule."""
    path = Path(name_or_path)
    if not path.exists():
        path = SUITES_DIR / f"{name_or_path}.yaml"
    if not path.exists():
        raise InputError([InputIssue("suite", "unknown_suite", f"{name_or_path!r} is neither a file nor one of "
                                                               f"{suite_names()}")])
    try:
        doc = yaml.safe_load(path.read_text())
        return Suite.model_validate(doc)
    except yaml.YAMLError as err:
        raise InputError([InputIssue(str(path), "yaml", str(err))]) from err
    except ValidationError as err:
        raise InputError(problems_from_validation(err)) from err
