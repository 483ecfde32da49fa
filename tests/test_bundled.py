"""The package data (optsched/data, the bench suites): found by name, shipped in the wheel."""

from __future__ import annotations

import fnmatch
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import optsched
from optsched.bundled import DATA_DIR, names, resolve
from optsched.errors import InputError

PACKAGE = Path(optsched.__file__).parent
ROOT = PACKAGE.parent


def test_bundled_names() -> None:
    assert names("cluster") == ["ascend-910b-4k", "dgx-h100-1k", "mixed-cloud-10k"]
    assert {"mixed", "inference", "llm-training", "rl", "topology-tight"} <= set(names("mix"))
    assert names("capacity") == ["demand-small", "pools"]


def test_a_name_or_a_path() -> None:
    assert resolve("cluster", "dgx-h100-1k") == DATA_DIR / "clusters" / "dgx-h100-1k.yaml"
    assert resolve("cluster", "my/cluster.yaml") == Path("my/cluster.yaml")  # a path is the loader's to read
    assert resolve("mix", Path("mix")) == Path("mix")
    with pytest.raises(InputError) as err:
        resolve("cluster", "dgx-h100-2k", field="clusters[0]")
    (issue,) = err.value.problems
    assert (issue.path, issue.rule) == ("clusters[0]", "unknown_reference") and "dgx-h100-1k" in issue.message


def test_reference_cluster_is_public() -> None:
    cluster = optsched.reference_cluster("dgx-h100-1k")
    assert len(cluster.nodes) == 128
    assert optsched.reference_cluster(DATA_DIR / "clusters" / "dgx-h100-1k.yaml") == cluster


def test_every_data_file_is_package_data() -> None:
    """Each file under optsched/data and optsched/bench/suites matches a package-data glob of
    pyproject.toml, so the wheel carries it (scripts/wheel_smoke.py checks the wheel itself)."""
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["optsched"]
    files = [f.relative_to(PACKAGE).as_posix() for d in ("data", "bench/suites") for f in (PACKAGE / d).rglob("*")
             if f.is_file()]
    assert len(files) >= 14
    missing = [f for f in files if not any(fnmatch.fnmatchcase(f, g) and f.count("/") == g.count("/") for g in globs)]
    assert missing == []


def test_optsched_models_replaces_the_data_folder(tmp_path: Path) -> None:
    (tmp_path / "clusters").mkdir()
    (tmp_path / "clusters" / "tiny.yaml").write_text((DATA_DIR / "clusters" / "dgx-h100-1k.yaml").read_text())
    code = "from optsched.bundled import names; print(names('cluster'))"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "OPTSCHED_MODELS": str(tmp_path)},
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['tiny']"
