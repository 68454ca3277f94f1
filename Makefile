# The two set-up commands: `make demo` runs the main job, `make test` runs every check.
# Both create .venv and install what they need; re-running them is cheap.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.charter-installed

.PHONY: demo test lint typecheck pytest bench clean services

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/charter demo

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy src

# PostgreSQL backs the runtime's second EventLog backend; its tests fail (not skip) in CI
# when it is unreachable, so start the local cluster if it is not already up.
services:
	@pg_isready -q -h 127.0.0.1 || pg_ctlcluster --skip-systemctl-redirect $$(ls /etc/postgresql) main start
	@for i in 1 2 3 4 5 6 7 8 9 10; do pg_isready -q -h 127.0.0.1 && exit 0; sleep 1; done; \
	  echo "PostgreSQL did not become ready on 127.0.0.1:5432" >&2; exit 1

pytest: $(STAMP) services
	$(BIN)/pytest

test: lint typecheck pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/policy_decide.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
