# The two set-up commands: `make demo` runs the main job, `make test` runs every check.
# Both create .venv and install what they need; re-running them is cheap.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.charter-installed

.PHONY: demo test lint typecheck pytest bench clean services mcp-npm clis browser axe sandbox-tools tokenizers console-screenshots

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

# npm MCP servers for tests/agent/test_mcp_npm.py, installed with `npm ci` from the pinned
# lock in tests/agent/mcp_npm/ into a cache outside the repo; a no-op while the installed
# lock matches. Without npm: an error under CI=true, a notice otherwise (the tests skip).
MCP_NPM_SRC := tests/agent/mcp_npm
MCP_NPM_DIR ?= $(or $(CHARTER_MCP_NPM_DIR),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/charter/npm)

mcp-npm:
	@if cmp -s $(MCP_NPM_SRC)/package-lock.json "$(MCP_NPM_DIR)/.installed-lock.json" \
	  && [ -x "$(MCP_NPM_DIR)/node_modules/.bin/mcp-server-filesystem" ]; then exit 0; fi; \
	if ! command -v npm >/dev/null 2>&1; then \
	  if [ "$$CI" = true ]; then echo "mcp-npm: npm is required (CI=true)" >&2; exit 1; fi; \
	  echo "mcp-npm: npm not found; the npm MCP server tests will be skipped" >&2; exit 0; \
	fi; \
	echo "mcp-npm: installing into $(MCP_NPM_DIR)"; \
	mkdir -p "$(MCP_NPM_DIR)" && rm -f "$(MCP_NPM_DIR)/.installed-lock.json" \
	  && cp $(MCP_NPM_SRC)/package.json $(MCP_NPM_SRC)/package-lock.json "$(MCP_NPM_DIR)/" \
	  && npm ci --prefix "$(MCP_NPM_DIR)" --no-audit --no-fund --loglevel=error \
	  && cp $(MCP_NPM_SRC)/package-lock.json "$(MCP_NPM_DIR)/.installed-lock.json"

# The four coding CLIs `charter launch` is verified against (tests/launch), pinned to exact
# versions in tests/launch/clis_npm/package.json, installed into a cache outside the repo; a
# no-op while the installed package.json matches. Without npm: an error under CI=true, a notice otherwise.
CLIS_SRC := tests/launch/clis_npm
CLIS_DIR ?= $(or $(CHARTER_CLIS_DIR),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/charter/clis)

clis:
	@if cmp -s $(CLIS_SRC)/package.json "$(CLIS_DIR)/.installed-package.json" \
	  && [ -x "$(CLIS_DIR)/node_modules/.bin/claude" ] && [ -x "$(CLIS_DIR)/node_modules/.bin/codex" ] \
	  && [ -x "$(CLIS_DIR)/node_modules/.bin/gemini" ] && [ -x "$(CLIS_DIR)/node_modules/.bin/opencode" ]; \
	  then exit 0; fi; \
	if ! command -v npm >/dev/null 2>&1; then \
	  if [ "$$CI" = true ]; then echo "clis: npm is required (CI=true)" >&2; exit 1; fi; \
	  echo "clis: npm not found; the real-CLI launch tests will be skipped" >&2; exit 0; \
	fi; \
	echo "clis: installing claude, codex, gemini, opencode into $(CLIS_DIR)"; \
	mkdir -p "$(CLIS_DIR)" && rm -f "$(CLIS_DIR)/.installed-package.json" \
	  && cp $(CLIS_SRC)/package.json "$(CLIS_DIR)/" \
	  && npm install --prefix "$(CLIS_DIR)" --no-audit --no-fund --loglevel=error \
	  && cp $(CLIS_SRC)/package.json "$(CLIS_DIR)/.installed-package.json"

# Debian's Chromium for the console's real-browser tests (Playwright drives it through
# executable_path; Playwright's own browser downloads are not used). Without apt-get as
# root: an error under CI=true, a notice otherwise (the tests skip).
browser:
	@if [ -x /usr/bin/chromium ]; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then \
	  if [ "$$CI" = true ]; then echo "browser: apt-get as root is required (CI=true)" >&2; exit 1; fi; \
	  echo "browser: chromium not installed; the browser tests will be skipped" >&2; exit 0; \
	fi; \
	echo "browser: installing Debian's chromium"; \
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null

# axe-core for the console's accessibility check (tests/run/test_console_browser.py injects
# it into each page through Playwright), installed with `npm ci` from the pinned lock in
# tests/run/axe_npm/ into a cache outside the repo; a no-op while the installed lock matches.
# Without npm: an error under CI=true, a notice otherwise (the accessibility test skips).
AXE_SRC := tests/run/axe_npm
AXE_DIR ?= $(or $(CHARTER_AXE_DIR),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/charter/axe)

axe:
	@if cmp -s $(AXE_SRC)/package-lock.json "$(AXE_DIR)/.installed-lock.json" \
	  && [ -f "$(AXE_DIR)/node_modules/axe-core/axe.min.js" ]; then exit 0; fi; \
	if ! command -v npm >/dev/null 2>&1; then \
	  if [ "$$CI" = true ]; then echo "axe: npm is required (CI=true)" >&2; exit 1; fi; \
	  echo "axe: npm not found; the console accessibility test will be skipped" >&2; exit 0; \
	fi; \
	echo "axe: installing axe-core into $(AXE_DIR)"; \
	mkdir -p "$(AXE_DIR)" && rm -f "$(AXE_DIR)/.installed-lock.json" \
	  && cp $(AXE_SRC)/package.json $(AXE_SRC)/package-lock.json "$(AXE_DIR)/" \
	  && npm ci --prefix "$(AXE_DIR)" --no-audit --no-fund --loglevel=error \
	  && cp $(AXE_SRC)/package-lock.json "$(AXE_DIR)/.installed-lock.json"

# The console's screenshots at 1280x800 (the README shows docs/img/console-fleet.png and
# docs/img/console-run.png): the browser tests save every page to test-artifacts/console/.
console-screenshots: $(STAMP) browser axe
	$(BIN)/pytest tests/run/test_console_browser.py -q
	mkdir -p docs/img
	cp test-artifacts/console/fleet.png docs/img/console-fleet.png
	cp test-artifacts/console/run.png docs/img/console-run.png

# bubblewrap (gcc builds the Landlock helper, which also bridges the sandbox network
# proxy and applies the unix-socket filter) for charter.sandbox and the bash
# tool's tests, strace for the policy-vs-execve property test, docker-compose to validate
# deploy/compose.yaml, iproute2 (`ip netns`) for the simulated-hosts replica tests. Installed
# with apt-get when missing and running as root; otherwise an error under CI=true, a notice
# (tests skip) elsewhere.
SANDBOX_TOOLS := bwrap:bubblewrap strace:strace docker-compose:docker-compose cc:gcc \
  ip:iproute2

sandbox-tools:
	@missing=""; for pair in $(SANDBOX_TOOLS); do \
	  command -v $${pair%%:*} >/dev/null 2>&1 || missing="$$missing $${pair#*:}"; done; \
	[ -z "$$missing" ] && exit 0; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "sandbox-tools: apt-get install$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null \
	    && exit 0; \
	fi; \
	if [ "$$CI" = true ]; then echo "sandbox-tools: cannot install$$missing (CI=true)" >&2; exit 1; fi; \
	echo "sandbox-tools: missing$$missing; the sandbox tests will be skipped" >&2

# tiktoken's BPE files (o200k_base, cl100k_base) for exact OpenAI token counts in agent
# compaction: rebuilt offline from the js-tiktoken npm package's ranks and checked against
# tiktoken's published SHA-256 (charter.agent.tokens); a no-op once cached.
JS_TIKTOKEN := js-tiktoken@1.0.21

tokenizers: $(STAMP)
	@if $(BIN)/python -c "import sys; from charter.agent.tokens import tiktoken_ready; sys.exit(0 if tiktoken_ready() else 1)"; 	  then exit 0; fi; 	if ! command -v npm >/dev/null 2>&1; then 	  if [ "$$CI" = true ]; then echo "tokenizers: npm is required (CI=true)" >&2; exit 1; fi; 	  echo "tokenizers: npm not found; token counts use the estimate" >&2; exit 0; 	fi; 	tmp=$$(mktemp -d); 	( cd $$tmp && npm pack $(JS_TIKTOKEN) --silent >/dev/null && tar xzf js-tiktoken-*.tgz ) 	  && $(BIN)/python -m charter.agent.tokens install $$tmp/package/dist/ranks; 	status=$$?; rm -rf $$tmp; exit $$status

pytest: $(STAMP) services mcp-npm clis browser axe sandbox-tools tokenizers
	$(BIN)/pytest

test: lint typecheck pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/policy_decide.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
