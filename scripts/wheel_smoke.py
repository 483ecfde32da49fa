"""Build the wheel, install it into a fresh virtual environment, and use it from outside the repository.

`make test` runs this after the unit tests: the editable install they use cannot see what a wheel
leaves out (package data, the license, entry points). Steps, each from an empty folder outside the
repository with the fresh environment's `optsched`: `--version`, `demo` (the bundled 10,240-GPU
cluster), `generate` / `solve --json` / `check` by cluster name, `capacity` with the bundled examples,
`bench fgd --seeds 1` (two policies, into a temporary folder; skipped when the trace data is not on
this machine), the README's Python example, run as written, and then, with the `k8s` and `server`
extras installed, `optsched serve`: ready, one round over HTTP, its metrics; with the `slurm` extra,
`optsched slurm` on Slurm's own JSON.

Run: `.venv/bin/python scripts/wheel_smoke.py [--keep DIR]`. Exit 0 when every step passed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(cmd: list[str], cwd: Path, env: dict[str, str], ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
    """Run one step; print its command and time; fail loudly with its output when the exit code is not in `ok`."""
    start = time.perf_counter()
    res = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    print(f"  {time.perf_counter() - start:6.1f} s  exit {res.returncode}  {' '.join(cmd)}", flush=True)
    if res.returncode not in ok:
        sys.stdout.write(res.stdout[-4000:] + res.stderr[-4000:])
        raise SystemExit(f"wheel smoke test failed: {' '.join(cmd)} exited {res.returncode}")
    return res


def readme_example() -> str:
    """The first ```python block of README.md (the 'In Python' section)."""
    text = (ROOT / "README.md").read_text()
    match = re.search(r"## In Python\s+```python\n(.*?)```", text, re.S)
    if match is None:
        raise SystemExit("README.md has no ```python block under '## In Python'")
    return match.group(1)


def slurm_smoke(cli: Path, work: Path, env: dict[str, str]) -> None:
    """`optsched slurm` from the installed extra on Slurm's own JSON (a copy of the test fixtures):
    it prints the command that starts the pending GPU job."""
    data = ROOT / "tests" / "data" / "slurm" / "slurmweb-25.11-v0.0.44"
    for name in ("nodes", "job-gpus-pending", "qos"):
        shutil.copy(data / f"{name}.json", work / f"slurm-{name}.json")
    out = run([str(cli), "slurm", "--nodes", "slurm-nodes.json", "--jobs", "slurm-job-gpus-pending.json",
               "--qos", "slurm-qos.json"], work, env)
    if not re.search(r"^scontrol update JobId=4965 ReqNodeList=gpu\d NumNodes=1$", out.stdout, re.M):
        raise SystemExit(f"optsched slurm printed no start for job 4965: {out.stdout!r}")


def serve_smoke(cli: Path, work: Path, env: dict[str, str]) -> None:
    """`optsched serve` from the installed extras: healthy, ready, a round on a bundled cluster's
    document over HTTP, metrics; then stopped."""
    import socket
    import urllib.error
    import urllib.request

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    start = time.perf_counter()
    server = subprocess.Popen([str(cli), "serve", "--port", str(port), "--log-level", "warning"], cwd=work, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        while True:
            try:
                with urllib.request.urlopen(f"{base}/readyz", timeout=5) as resp:
                    if resp.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError):
                pass
            if server.poll() is not None or time.perf_counter() - start > 60:
                out = server.stdout.read() if server.stdout else ""
                raise SystemExit(f"optsched serve did not become ready:\n{out[-4000:]}")
            time.sleep(0.2)
        doc = subprocess.run([str(cli.parent / "python"), "-c", "import optsched, sys; sys.stdout.write(optsched.dump("
                              "optsched.reference_cluster('dgx-h100-1k'), fmt='json'))"], cwd=work, env=env,
                             capture_output=True, text=True, check=True).stdout
        body = json.dumps({"cluster": json.loads(doc), "queue": {"jobs": []}, "solver": "best-fit"}).encode()
        request = urllib.request.Request(f"{base}/v1/rounds", data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as resp:
            answer = json.loads(resp.read())
        if answer["summary"]["solver"]["name"] != "best-fit":
            raise SystemExit(f"POST /v1/rounds answered {answer['summary']}")
        with urllib.request.urlopen(f"{base}/metrics", timeout=5) as resp:
            if b'optsched_rounds_total{source="request",status="heuristic"} 1.0' not in resp.read():
                raise SystemExit("/metrics did not count the round")
        print(f"  {time.perf_counter() - start:6.1f} s  optsched serve: ready, a round over HTTP, /metrics", flush=True)
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", type=Path, help="work in this folder and keep it (default: a temporary one)")
    args = ap.parse_args()
    tmp = args.keep or Path(tempfile.mkdtemp(prefix="optsched-wheel-"))
    tmp.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "OPTSCHED_MODELS")}
    try:
        print(f"wheel smoke test in {tmp}", flush=True)
        dist, venv, work = tmp / "dist", tmp / "venv", tmp / "work"
        work.mkdir(exist_ok=True)
        run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", str(ROOT), "-w", str(dist)], tmp, env)
        wheel = next(dist.glob("optsched-*.whl"))
        run([sys.executable, "-m", "venv", "--clear", str(venv)], tmp, env)
        py, cli = venv / "bin" / "python", venv / "bin" / "optsched"
        run([str(py), "-m", "pip", "install", "--quiet", str(wheel)], tmp, env)

        where = run([str(py), "-c", "import optsched, pathlib; print(pathlib.Path(optsched.__file__).parent)"],
                    work, env).stdout.strip()
        if Path(where).is_relative_to(ROOT):
            raise SystemExit(f"the fresh environment imported optsched from the repository ({where})")
        licenses = list((Path(where).parent).glob("optsched-*.dist-info/licenses/LICENSE"))
        if not licenses or "Apache License" not in licenses[0].read_text():
            raise SystemExit("the wheel carries no LICENSE")

        version = run([str(cli), "--version"], work, env).stdout
        if not version.startswith("optsched "):
            raise SystemExit(f"--version printed {version!r}")
        demo = run([str(cli), "demo"], work, env).stdout
        if "the plan breaks no rule" not in demo:
            raise SystemExit("demo did not end with a checked plan:\n" + demo)
        run([str(cli), "generate", "--cluster", "dgx-h100-1k", "--jobs", "60", "-o", "queue.yaml"], work, env)
        solved = run([str(cli), "solve", "dgx-h100-1k", "queue.yaml", "--solver", "best-fit", "--json",
                      "-o", "plan.json"], work, env).stdout
        if json.loads(solved)["admitted_jobs"] <= 0:
            raise SystemExit("solve admitted nothing on an idle cluster")
        run([str(cli), "check", "dgx-h100-1k", "queue.yaml", "plan.json"], work, env)
        run([str(cli), "capacity", "demand-small", "pools", "--time-limit", "30"], work, env)

        data = Path(os.environ.get("OPTSCHED_DATA") or ROOT.parent / "shared" / "data")
        bench = run([str(cli), "bench", "fgd", "--seeds", "1", "--solvers", "best-fit,fgd", "--workers", "2",
                     "--out", str(tmp / "bench")], work, {**env, "OPTSCHED_DATA": str(data)}, ok=(0, 3))
        if bench.returncode == 3:
            print("  (bench fgd skipped: the openb trace is not on this machine)")
        elif not (tmp / "bench" / "fgd.md").is_file():
            raise SystemExit("bench fgd wrote no report")

        (work / "example.py").write_text(readme_example())
        run([str(py), "example.py"], work, env)

        run([str(py), "-m", "pip", "install", "--quiet", f"{wheel}[k8s,server,slurm]"], tmp, env)
        serve_smoke(cli, work, env)
        slurm_smoke(cli, work, env)
        print("wheel smoke test passed", flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
