# Two entry points, both self-contained on a fresh machine (they create .venv and install).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

$(BIN)/loglens: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(BIN)/loglens

.PHONY: demo test
demo: $(BIN)/loglens  ## ingest the bundled story log, then explain the 144 vs 170 tok/s gap
	rm -rf .loglens-demo
	$(BIN)/loglens ingest sample_logs/sglang-glm5.log --store .loglens-demo
	$(BIN)/loglens runs --store .loglens-demo
	$(BIN)/loglens reconcile --bench sample_logs/sglang-glm5.bench.jsonl --record 1 --store .loglens-demo
	$(BIN)/loglens reconcile --bench sample_logs/sglang-glm5.bench.jsonl --record 1 --quote 170.24 --store .loglens-demo
	$(BIN)/loglens diagnose --store .loglens-demo

test: $(BIN)/loglens  ## the whole test suite (the browser test needs Debian's chromium)
	$(BIN)/python -m pytest -p no:cacheprovider
