# `make run` and `make test` work on a fresh machine: they create .venv when missing, install the project, and
# compile its numba kernels into numba's on-disk cache once (`python -m topo.warm`, about two minutes on 2 cores).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
GROUPING ?= cg
ENGINE   ?= ray
STAMP  := $(VENV)/.installed

.PHONY: run test test-all tools lint bench table1 clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,bench]'
	$(PY) -m topo.warm
	touch $(STAMP)

# the command line's defaults: Fig. 8 of Consistent Grouping (10 workers, three 5x faster) at 80% load, on Ray actors
run: $(STAMP)
	$(PY) scripts/run_topology.py --grouping $(GROUPING) --engine $(ENGINE) --out runs/make-run --overwrite

test: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m pytest

# the system tools some tests use (Java 17 for Spark, Prometheus), as CI installs them: needs root (sudo make tools)
tools:
	.ci/tools

test-all: $(STAMP)
	$(PY) -m pytest -m ''

lint: $(STAMP)
	$(PY) -m ruff check .

bench: $(STAMP)
	$(PY) benchmarks/bench_routing.py
	$(PY) benchmarks/bench_sim.py
	$(PY) benchmarks/bench_analyze.py

table1: $(STAMP)
	$(PY) scripts/table1.py --markdown --plot results/table1.png

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
