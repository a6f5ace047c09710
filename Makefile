# `make run` and `make test` work on a fresh machine: they create .venv when missing, install the versions pinned in
# requirements.lock (hash-checked) and the project, and compile its numba kernels into numba's on-disk cache once
# (`python -m topo.warm`, about three minutes on 2 cores). `make lock` chooses the versions anew.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
GROUPING ?= cg
ENGINE   ?= ray
STAMP  := $(VENV)/.installed

FLINK_STAMP := $(VENV)/.flink

.PHONY: run test test-all tools flink lint lock bench table1 clean

# the lock is the only place versions are chosen: pip installs exactly its pins, each checked against its hashes
$(STAMP): pyproject.toml requirements.lock
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --require-hashes -r requirements.lock
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	$(PY) -m topo.warm
	touch $(STAMP)

# choose every version anew (the newest that pyproject.toml allows, for every platform and Python it supports)
lock: $(STAMP)
	$(PY) -m uv pip compile pyproject.toml --extra dev --extra bench --universal --fork-strategy fewest \
		--generate-hashes --upgrade --quiet -o requirements.lock
	$(PY) -m uv pip compile requirements-flink.in --universal --generate-hashes --upgrade --quiet \
		-o requirements-flink.lock

# the command line's defaults: Fig. 8 of Consistent Grouping (10 workers, three 5x faster) at 80% load, on Ray actors
run: $(STAMP)
	$(PY) scripts/run_topology.py --grouping $(GROUPING) --engine $(ENGINE) --out runs/make-run --overwrite

test: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m pytest

# the system tools some tests use (Java 17 for Spark, Prometheus), as CI installs them: needs root (sudo make tools)
tools:
	.ci/tools

# --engine flink: Flink 2.3's jars (the `flink` extra, 330 MB, pinned with hashes in requirements-flink.lock) and the
# topology job compiled once against them (needs a JDK 17+: `sudo make tools`)
flink: $(FLINK_STAMP)

$(FLINK_STAMP): $(STAMP) requirements-flink.lock topo/flink_engine/TopologyJob.java
	$(PY) -m pip install -q --require-hashes --no-deps -r requirements-flink.lock
	$(PY) -m topo.flink_engine.install
	touch $(FLINK_STAMP)

test-all: $(STAMP)
	$(PY) -m pytest -m ''

lint: $(STAMP)
	$(PY) -m ruff check .

bench: $(STAMP)
	$(PY) benchmarks/bench_routing.py
	$(PY) benchmarks/bench_sim.py
	$(PY) benchmarks/bench_analyze.py

table1: $(STAMP)
	$(PY) scripts/table1.py --markdown --plot runs/table1.png

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
