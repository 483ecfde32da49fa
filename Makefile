# Two commands for a newcomer: `make demo` and `make test`. Each bootstraps .venv on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint docs bench clean

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,ray,docs,k8s,server,slurm]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/optsched demo

test: $(STAMP)
	$(BIN)/ruff check optsched tests benchmarks scripts
	$(BIN)/mypy optsched
	$(BIN)/python -m pytest
	$(BIN)/python scripts/wheel_smoke.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# The documentation site (mkdocs.yml) into site/.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

lint: $(STAMP)
	$(BIN)/ruff check optsched tests benchmarks scripts
	$(BIN)/mypy optsched

# Only this target writes the committed evidence in benchmarks/results/ (benchmarks/common.py).
bench: export OPTSCHED_RESULTS = $(CURDIR)/benchmarks/results
bench: $(STAMP)
	$(BIN)/python benchmarks/baselines.py
	$(BIN)/python benchmarks/compile.py
	$(BIN)/python benchmarks/cpsat.py
	$(BIN)/python benchmarks/cpsat.py --tight
	$(BIN)/python benchmarks/cpsat_tuning.py
	$(BIN)/python benchmarks/bound.py
	$(BIN)/python benchmarks/guided.py
	$(BIN)/python benchmarks/huge.py
	$(BIN)/python benchmarks/tenancy.py
	$(BIN)/python benchmarks/kueue_speed.py
	$(BIN)/python benchmarks/capacity.py
	$(BIN)/python benchmarks/milp.py
	$(BIN)/python benchmarks/fgd.py --workload openb_pod_list_default,openb_pod_list_cpu250,openb_pod_list_gpushare100 --out benchmarks/results
	$(BIN)/python benchmarks/fgd_artifact.py --out benchmarks/results
	$(BIN)/python benchmarks/slurm.py
	$(BIN)/python benchmarks/auto.py
	$(BIN)/python benchmarks/pareto.py
	$(BIN)/python benchmarks/cost.py
	$(BIN)/python benchmarks/scale.py --huge --curve --out benchmarks/results
	$(BIN)/python benchmarks/domain_placement.py --out benchmarks/results
	$(BIN)/python benchmarks/startup.py --out benchmarks/results
	$(BIN)/python benchmarks/service.py --out benchmarks/results
	$(BIN)/python benchmarks/timelimit.py
	$(BIN)/python benchmarks/deterministic.py
	$(BIN)/python benchmarks/fingerprints.py --out benchmarks/results
	$(BIN)/optsched bench rounds --out benchmarks/results
	$(BIN)/optsched bench philly --out benchmarks/results

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis site
