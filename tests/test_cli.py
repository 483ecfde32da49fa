"""The `optsched` command: exit codes and outputs."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from optsched.cli import app
from tests.conftest import EXAMPLES

runner = CliRunner()
C, Q, P = (str(EXAMPLES / n) for n in ("cluster.yaml", "queue.yaml", "plan.json"))


def test_check_valid_and_invalid(tmp_path: Path) -> None:
    assert runner.invoke(app, ["check", C, Q, P]).exit_code == 0
    plan = json.loads(Path(P).read_text())
    plan["evictions"] = []
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(plan))
    res = runner.invoke(app, ["check", C, Q, str(bad)])
    assert res.exit_code == 1 and "devices" in res.output


def test_solve_writes_a_valid_plan(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    res = runner.invoke(app, ["solve", C, Q, "--solver", "volcano", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "admitted jobs" in res.output
    assert runner.invoke(app, ["check", C, Q, str(out)]).exit_code == 0


def test_evaluate_json() -> None:
    res = runner.invoke(app, ["evaluate", C, Q, P, "--json"])
    assert res.exit_code == 0
    assert json.loads(res.output)["disruption"] == 1.0


def test_evaluate_bound_reports_the_gap() -> None:
    """`evaluate --bound`: the LP bound on admitted value and the plan's gap to it."""
    res = runner.invoke(app, ["evaluate", C, Q, P, "--json", "--bound"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["bound_admitted_value"] >= out["admitted_value"]
    assert out["gap"] == (out["bound_admitted_value"] - out["admitted_value"]) / out["bound_admitted_value"]
    assert "gap" in runner.invoke(app, ["evaluate", C, Q, P, "--bound"]).output


def test_evaluate_bound_reports_the_least_disruption_for_the_plans_value() -> None:
    """`evaluate --bound`: the least lost work of any plan admitting the plan's value
    (`lost_work_bound`), at most the plan's own; the example plan evicts one job for its value."""
    out = json.loads(runner.invoke(app, ["evaluate", C, Q, P, "--json", "--bound"]).output)
    assert out["disruption_floor_status"] == "optimal"
    assert 0.0 <= out["disruption_floor"] <= out["disruption"]
    assert "disruption_floor" in runner.invoke(app, ["evaluate", C, Q, P, "--bound"]).output


def _solve_with_node_domain(tmp_path: Path, domain: str) -> Any:
    """`optsched solve` on the example cluster with its first node under `domain` (no such leaf)."""
    doc: dict[str, Any] = yaml.safe_load(Path(C).read_text())
    doc["nodes"][0]["domain"] = domain
    bad = tmp_path / "c.yaml"
    bad.write_text(yaml.safe_dump(doc))
    return runner.invoke(app, ["solve", str(bad), Q])


def test_input_error_exit_2(tmp_path: Path) -> None:
    res = _solve_with_node_domain(tmp_path, "nowhere")
    assert res.exit_code == 2
    assert "nodes[0].domain" in res.output and "Traceback" not in res.output


def test_input_error_lines_are_text_not_markup(tmp_path: Path) -> None:
    """An id that looks like rich markup and the `[rule]` tag are printed as they are (issue 20)."""
    res = _solve_with_node_domain(tmp_path, "[/x]leaf[bold]")
    assert res.exit_code == 2, res.output
    assert "[/x]leaf[bold]" in res.output and "[unknown_reference]" in res.output
    assert "Traceback" not in res.output


def test_version() -> None:
    from optsched import __version__

    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0 and res.output.strip() == f"optsched {__version__}"


def test_solve_and_check_json(tmp_path: Path) -> None:
    """`solve --json` prints the counts and the solver's statistics; `check --json` the violations,
    with exit 1 when there are some."""
    out = tmp_path / "plan.json"
    res = runner.invoke(app, ["solve", C, Q, "--solver", "best-fit", "--json", "-o", str(out)])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output)
    plan = json.loads(out.read_text())
    assert summary["solver"]["name"] == "best-fit" and summary["status_meaning"]
    assert summary["placed_replicas"] == len(plan["placements"])
    assert summary["objective"]["admitted_value"] == plan["objective"]["admitted_value"]
    assert json.loads(runner.invoke(app, ["check", C, Q, str(out), "--json"]).output) == \
        {"valid": True, "violations": []}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(json.loads(Path(P).read_text()) | {"evictions": []}))
    res = runner.invoke(app, ["check", C, Q, str(bad), "--json"])
    assert res.exit_code == 1
    found = json.loads(res.output)
    assert found["valid"] is False and {v["rule"] for v in found["violations"]} and \
        all(set(v) >= {"rule", "message", "job", "node"} for v in found["violations"])


def test_summary_explains_the_status_and_prints_the_gap_as_a_percentage() -> None:
    from optsched.model.stats import STATUS_MEANING

    res = runner.invoke(app, ["solve", C, Q, "--solver", "cpsat", "--time-limit", "2"])
    assert res.exit_code == 0, res.output
    flat = " ".join(res.output.split())
    status = next(s for s in STATUS_MEANING if f"{s}: " in flat)
    assert " ".join(STATUS_MEANING[status].split()) in flat
    assert re.search(r"bound / gap .*? / \d+\.\d\d%", flat), flat


def test_unknown_cluster_name_names_the_bundled_ones(tmp_path: Path) -> None:
    res = runner.invoke(app, ["generate", "--cluster", "no-such-cluster", "-o", str(tmp_path / "q.yaml")])
    assert res.exit_code == 2
    assert "cluster" in res.output and "dgx-h100-1k" in res.output and "Traceback" not in res.output


def test_schema() -> None:
    res = runner.invoke(app, ["schema", "plan"])
    assert res.exit_code == 0 and "placements" in json.loads(res.output)["properties"]


def test_generate(tmp_path: Path) -> None:
    out = tmp_path / "q.yaml"
    res = runner.invoke(app, ["generate", "--cluster", C, "--mix", "inference", "--jobs", "5", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert len(yaml.safe_load(out.read_text())["jobs"]) == 5
    assert runner.invoke(app, ["solve", C, str(out)]).exit_code == 0


def test_generate_solve_check_on_every_reference_cluster(tmp_path: Path) -> None:
    """The issue's acceptance path: generate, solve with volcano, check, on all three clusters (by name)."""
    for cluster in ("dgx-h100-1k", "ascend-910b-4k", "mixed-cloud-10k"):
        name = cluster
        queue, plan = tmp_path / f"{name}-q.yaml", tmp_path / f"{name}-p.json"
        res = runner.invoke(app, ["generate", "--cluster", cluster, "--mix", "mixed", "--jobs", "200",
                                  "--load", "1.5", "--seed", "0", "-o", str(queue)])
        assert res.exit_code == 0, res.output
        res = runner.invoke(app, ["solve", cluster, str(queue), "--solver", "volcano", "-o", str(plan)])
        assert res.exit_code == 0, res.output
        res = runner.invoke(app, ["check", cluster, str(queue), str(plan)])
        assert res.exit_code == 0, res.output


def test_capacity_prints_the_decision_and_writes_json(tmp_path: Path) -> None:
    """`optsched capacity DEMAND POOLS`: the decision table and the cost split; a lower service
    level never costs more; bad input exits 2."""
    out = tmp_path / "capacity.json"
    d, p = "demand-small", "pools"
    res = runner.invoke(app, ["capacity", d, p, "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "reserved nodes" in res.output and "expected cost" in res.output
    full = json.loads(out.read_text())
    assert full["service_level"] == 1.0 and set(full["reserved"]) == {"h100-8x", "a100-8x", "l40s-4x"}
    res = runner.invoke(app, ["capacity", d, p, "--service-level", "0.9", "-o", str(out)])
    assert res.exit_code == 0, res.output
    lower = json.loads(out.read_text())
    assert lower["service_level"] >= 0.9 - 1e-9
    assert sum(lower["cost"].values()) <= sum(full["cost"].values()) + 1e-6
    assert runner.invoke(app, ["capacity", d, p, "--service-level", "1.5"]).exit_code == 2


def test_capacity_from_a_trace(tmp_path: Path) -> None:
    """`optsched capacity POOLS --from-trace TRACE`: demand derived from the trace (and saved)."""
    trace = tmp_path / "t.csv"
    trace.write_text("start_s,duration_s,gpus\n" + "".join(f"{h * 3600},3600,{16 + 8 * (h % 3)}\n" for h in range(48)))
    saved = tmp_path / "demand.yaml"
    res = runner.invoke(app, ["capacity", "pools", "--from-trace", str(trace), "--model", "H100",
                              "--weeks", "1", "--scenarios", "3", "--write-demand", str(saved)])
    assert res.exit_code == 0, res.output
    assert "expected cost" in res.output and saved.exists()
    assert runner.invoke(app, ["capacity", "pools"]).exit_code == 2  # DEMAND missing


def test_solvers_lists_every_name() -> None:
    from optsched.solvers.registry import solver_names

    res = runner.invoke(app, ["solvers"])
    assert res.exit_code == 0, res.output
    listed = {line.split("│")[1].strip() for line in res.output.splitlines() if line.startswith("│")}
    assert set(solver_names()) <= listed
