# janus: `make test` and `make demo` do all set-up on a fresh machine.
# Another Python in its own venv: `make test PYTHON=python3.13 VENV=.venv313`.
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.janus-setup
OPS_STAMP := $(VENV)/.janus-ops
export TF_CPP_MIN_LOG_LEVEL ?= 2
export PYTHONUNBUFFERED := 1
# Test processes (pytest-xdist): one a core, at most 4 (each holds a TensorFlow runtime).
JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); echo $$(( n > 4 ? 4 : n )))
# `make test SKIP_SLOW=1` leaves out the tests marked slow (CI does, on Python 3.12 and 3.13).
SLOW := $(if $(SKIP_SLOW), and not slow)

.PHONY: setup ops horovod test test-keras3 test-legacy-keras demo bench bench-quick lint clean

setup: $(STAMP)

$(STAMP): pyproject.toml setup.py requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV) || { test "$(origin PYTHON)" = file && python3 -m venv $(VENV); }
	$(PY) --version
	$(PY) -m pip install -q --disable-pip-version-check -r requirements-dev.txt
	# tf_keras (Keras 2) without deps: its deps would pull the non-cpu TensorFlow wheel.
	$(PY) -m pip install -q --disable-pip-version-check --no-deps 'tf_keras==2.21.*'
	$(PY) -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(STAMP)

ops: $(OPS_STAMP)

$(OPS_STAMP): $(STAMP) $(wildcard csrc/*.cc) janus/ops/build.py
	$(PY) -m janus.ops
	touch $(OPS_STAMP)

# Horovod 0.28.1 built from its sdist with the TF 2.21 recipe (scripts/build_horovod.sh); the
# wheel is cached, so a re-run only reinstalls it. The Horovod tests skip, saying so, without it.
horovod: setup
	bash scripts/build_horovod.sh

test: ops test-keras3 test-legacy-keras

test-keras3: ops
	$(PY) -m pytest -q -n $(JOBS) $(if $(SKIP_SLOW),-m "not slow") tests

# The Keras flavour is fixed at import: the Keras-dependent tests run again under Keras 2.
test-legacy-keras: ops
	TF_USE_LEGACY_KERAS=1 $(PY) -m pytest -q -n $(JOBS) -m "keras$(SLOW)" tests

demo: ops
	$(PY) examples/demo.py

bench: ops
	$(PY) -m benchmarks

bench-quick: ops
	$(PY) -m benchmarks --quick

lint: setup
	$(VENV)/bin/ruff format --check janus tests benchmarks examples
	$(VENV)/bin/ruff check janus tests benchmarks examples

clean:
	rm -rf $(VENV) build *.egg-info
