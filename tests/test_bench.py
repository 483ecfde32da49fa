"""The benchmark harness: suites as data, parallel runs (process pool, Ray), CSV and reports."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from optsched import InputError, dump, load_cluster
from optsched.bench import Suite, load_suite, run_cases, run_suite, suite_names
from optsched.cli import app

EXAMPLE_CLUSTER = str(Path(__file__).parent / "data" / "examples" / "cluster.yaml")


def _rounds_suite(**extra: object) -> Suite:
    return Suite.model_validate({"name": "tiny", "kind": "rounds", "clusters": [EXAMPLE_CLUSTER],
                                 "workloads": [{"mix": "mixed", "jobs": 6, "load": 1.5}],
                                 "solvers": ["best-fit", "volcano"], "seeds": [0, 1], "time_limits": [1.0], **extra})


def test_shipped_suites_load_and_expand() -> None:
    assert suite_names() == ["fgd", "philly", "rounds"]
    fgd = load_suite("fgd")
    assert len(fgd.cases()) == len(fgd.solvers) * 10 and len(fgd.cases(seeds=2)) == len(fgd.solvers) * 2
    assert {c.seed for c in fgd.cases(seeds=2)} == {42, 43}
    rounds = load_suite("rounds")
    assert len(rounds.cases()) == len(rounds.clusters) * len(rounds.solvers) * 3


def test_bad_suites_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unknown_suite"):
        load_suite("no-such-suite")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nkind: nonsense\nsolvers: [best-fit]\n")
    with pytest.raises(InputError, match="kind"):
        load_suite(bad)
    bad.write_text("name: x\nkind: rounds\n")
    with pytest.raises(InputError, match="solvers"):
        load_suite(bad)


def test_a_rounds_suite_runs_in_a_process_pool_and_writes_its_report(tmp_path: Path) -> None:
    suite = _rounds_suite()
    path, rows = run_suite(suite, out=tmp_path, workers=2, progress=False)
    assert len(rows) == 4 and all(r["valid"] for r in rows)
    assert [(r["solver"], r["seed"]) for r in rows] == [("best-fit", 0), ("best-fit", 1), ("volcano", 0),
                                                       ("volcano", 1)]
    for r in rows:  # the bound holds every plan's value: the gap is in [0, 1]
        assert 0.0 <= r["gap"] <= 1.0 + 1e-9 and r["admitted_value"] <= r["bound"] + 1e-6
    with open(tmp_path / "tiny.csv", newline="") as fh:
        assert len(list(csv.DictReader(fh))) == 4
    text = path.read_text()
    assert "| best-fit |" in text and "gap %" in text
    serial = run_cases(suite.cases(), workers=1, progress=False)
    assert [r["admitted_value"] for r in serial] == [r["admitted_value"] for r in rows]


def test_the_ray_executor_gives_the_same_rows() -> None:
    pytest.importorskip("ray", reason="the ray extra is installed by `make test`")
    suite = _rounds_suite(solvers=["best-fit"])
    local = run_cases(suite.cases(), workers=1, progress=False)
    remote = run_cases(suite.cases(), executor="ray", workers=2, progress=False)
    assert [(r["seed"], r["admitted_value"]) for r in remote] == [(r["seed"], r["admitted_value"]) for r in local]


def _fake_data(root: Path) -> None:
    openb = root / "alibaba-gpu-v2023"
    openb.mkdir(parents=True)
    (openb / "openb_node_list_gpu_node.csv").write_text(
        "sn,cpu_milli,memory_mib,gpu,model\n" + "".join(f"n{i},64000,262144,{g},G2\n" for i, g in enumerate([8, 8, 4])))
    (openb / "openb_pod_list_tiny.csv").write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
        + "".join(f"p{i},4000,1024,{n},{m},,LS,Running,0,10,0\n"
                  for i, (n, m) in enumerate([(1, 1000), (1, 500), (2, 1000), (1, 300), (0, 0), (1, 810)])))
    results = root / "fgd-results"
    results.mkdir()
    (results / "DERIVED_summary_alloc_at_100_and_130.csv").write_text(
        "workload,sc_policy,arrived_gpu_pct,alloc_pct_mean,alloc_pct_std\n"
        "openb_pod_list_tiny,05-BestFit,130,90.0,1.0\nopenb_pod_list_tiny,06-FGD,130,92.0,1.0\n")
    philly = root / "pollux-osdi21" / "traces"
    philly.mkdir(parents=True)
    (philly / "philly.csv").write_text("timestamp,duration,num_gpus,gpu_time,cluster\n" + "".join(
        f"2017-10-09 07:{i:02d}:00,{600 + 60 * i},{g},0,vc{i % 2}\n" for i, g in enumerate([8, 8, 16, 4, 1, 2, 8])))


def test_fgd_and_philly_suites_on_small_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    _fake_data(data)
    monkeypatch.setenv("OPTSCHED_DATA", str(data))
    fgd = Suite.model_validate({"name": "fgd-tiny", "kind": "fgd", "solvers": ["best-fit", "fgd", "batched-cpsat"],
                                "workloads": [{"trace": "openb_pod_list_tiny", "batch": 3, "protocol": "optsched"}],
                                "seeds": [1, 2]})
    path, rows = run_suite(fgd, out=tmp_path / "out", workers=1, progress=False)
    assert all(0 <= r["alloc_130"] <= 100 for r in rows) and len(rows) == 6
    text = path.read_text()
    assert "| fgd |" in text and "90.00 ± 1.00" in text and "batched-cpsat" in text
    assert "Paired with FGD" in text and "| fgd-bestfit |" not in text
    assert (tmp_path / "out" / "fgd-tiny-tiny-allocation.png").exists()
    artifact = fgd.model_copy(update={"name": "fgd-art", "solvers": ["best-fit", "fgd", "fgd-bestfit", "limit"],
                                      "workloads": [{"trace": "openb_pod_list_tiny"}]})
    path, rows = run_suite(artifact, out=tmp_path / "out", workers=1, progress=False)
    limits = {r["seed"]: r for r in rows if r["policy"] == "limit"}
    for r in rows:  # under the artifact's protocol each seed's limit bounds every policy of that seed
        for x in (0, 10, 50, 90, 100, 130):
            got, bound = r.get(f"alloc_{x}", math.nan), limits[r["seed"]].get(f"alloc_{x}", math.nan)
            assert math.isnan(got) or got <= bound + 1e-9
    assert {r["protocol"] for r in rows} == {"artifact"}
    assert "| fgd-bestfit |" in path.read_text() and "**limit**" in path.read_text()
    bad = fgd.model_copy(update={"workloads": [{"trace": "openb_pod_list_tiny", "protocol": "go"}], "seeds": [1]})
    with pytest.raises(InputError, match=r"workloads\.protocol"):
        run_suite(bad, out=tmp_path / "out", workers=1, progress=False)
    plain = tmp_path / "plain.yaml"  # Philly's virtual clusters are not tenants of the example: none
    dump(load_cluster(EXAMPLE_CLUSTER).model_copy(update={"tenants": [], "running": []}), plain)
    philly = Suite.model_validate({"name": "philly-tiny", "kind": "philly", "clusters": [str(plain)],
                                   "workloads": [{"days": 1, "round_every_s": 60}], "solvers": ["best-fit"]})
    path, rows = run_suite(philly, out=tmp_path / "out", workers=1, progress=False)
    assert rows[0]["jobs"] == 7 and rows[0]["jobs_finished"] + rows[0]["jobs_failed"] == 7
    assert "JCT p95" in path.read_text()


def test_cli_bench(tmp_path: Path) -> None:
    suite = tmp_path / "s.yaml"
    suite.write_text(f"name: s\nkind: rounds\nclusters: [{EXAMPLE_CLUSTER}]\n"
                     "workloads: [{mix: mixed, jobs: 4}]\nsolvers: [best-fit, first-fit]\n")
    result = CliRunner().invoke(app, ["bench", str(suite), "--out", str(tmp_path), "--workers", "1",
                                      "--solvers", "first-fit"])
    assert result.exit_code == 0, result.output
    assert "1 cases" in result.output and (tmp_path / "s.md").exists()
    bad = CliRunner().invoke(app, ["bench", str(suite), "--solvers", "cpsat"])
    assert bad.exit_code == 2 and "not_in_suite" in bad.output
    missing = CliRunner().invoke(app, ["bench", "fgd", "--out", str(tmp_path)], env={"OPTSCHED_DATA": str(tmp_path)})
    assert missing.exit_code == 3 and "absent" in missing.output
