"""Shared fixtures: the interchange examples (a copy of shared/examples, the format's contract).

One change from shared/examples: tenant research has `borrow_within_cohort: lower_priority`, without
which its 16-GPU llm-pretrain (nominal 8) may not evict eval-sweep (rule 5, Kueue's
`fitsResourceQuota`; docs/format.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from optsched.model import Cluster, Plan, Queue

DATA = Path(__file__).parent / "data"
EXAMPLES = DATA / "examples"


@pytest.fixture
def example_docs() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Fresh mutable copies of the example cluster, queue and plan documents."""
    return (yaml.safe_load((EXAMPLES / "cluster.yaml").read_text()),
            yaml.safe_load((EXAMPLES / "queue.yaml").read_text()),
            json.loads((EXAMPLES / "plan.json").read_text()))


@pytest.fixture
def example(example_docs: tuple[dict[str, Any], dict[str, Any], dict[str, Any]]) -> tuple[Cluster, Queue, Plan]:
    """The example documents as models."""
    c, q, p = example_docs
    return Cluster.model_validate(c), Queue.model_validate(q), Plan.model_validate(p)
