# jobpost: `make run` starts everything on embedded defaults; `make test` runs the whole suite.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The pinned versions (with their hashes) that `make install` installs: the runtime ones, the
# test tools and the dev extra (the `jobpost dev` mail sink) for `make install` and CI, the
# runtime ones alone for the Dockerfile. `make lock`
# writes both from pyproject.toml.
LOCK := requirements-test.txt
RUNTIME_LOCK := requirements.txt
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml $(wildcard $(LOCK)) | cksum | cut -d' ' -f1)
UV_VERSION := 0.13.9
# The machine the suite is tested on (CI's too); the Docker image is python:3.11 on Linux.
COMPILE := $(BIN)/uv pip compile pyproject.toml --quiet --generate-hashes \
	--python-version 3.11 --python-platform x86_64-unknown-linux-gnu --custom-compile-command 'make lock'

# `make check` runs these: the API and the domain in process (no gunicorn, celery or browser).
CHECK_TESTS := tests/api tests/models tests/test_docs.py tests/test_openapi_*.py tests/test_wiring.py \
	tests/test_layering.py

.DEFAULT_GOAL := help
.PHONY: help install lock catalogs run test check lint bench browser pgbouncer prometheus nginx clean

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-9s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml $(LOCK)
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "jobpost needs Python 3.11+"'
	@# A fresh virtualenv whenever the lock changes: a package the lock dropped (types-redis,
	@# say) must not linger and hide what a fresh clone lacks.
	$(PYTHON) -m venv --clear $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q --require-hashes -r $(LOCK)
	$(BIN)/pip install -q --no-deps --no-build-isolation -e .
	@# Before any conftest imports what the lock may lack: a clear "run make lock" instead.
	$(BIN)/pytest -q -p no:cacheprovider --noconftest tests/test_dependencies.py
	rm -f $(VENV)/.installed-* && touch $@

install: $(STAMP) ## create .venv and install jobpost with its test tools, as locked

lock: ## pin pyproject.toml's dependencies in requirements*.txt (UPGRADE=1: the newest allowed)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q uv==$(UV_VERSION)
	$(COMPILE) --extra test --extra dev $(if $(UPGRADE),--upgrade) -o $(LOCK)
	$(COMPILE) --constraint $(LOCK) -o $(RUNTIME_LOCK)

CATALOGS := models/core/locale
catalogs: install ## extract the pages' and emails' strings, update the French catalog, compile it
	$(BIN)/pybabel extract -F babel.cfg --no-location --sort-output --omit-header \
	  -o $(CATALOGS)/messages.pot api models workers
	$(BIN)/pybabel update -i $(CATALOGS)/messages.pot -d $(CATALOGS) -l fr \
	  -w 100 --no-fuzzy-matching --ignore-obsolete --ignore-pot-creation-date
	$(BIN)/pybabel compile -d $(CATALOGS) -l fr --statistics

run: install ## migrate, issue the demo key, start web + worker + beat + mail sink
	$(BIN)/jobpost db upgrade
	$(BIN)/jobpost demo
	$(BIN)/jobpost dev

# axe-core from the npm registry, for the browser test's accessibility checks (C17).
AXE_VERSION := 4.14.1
AXE := .venv/axe/node_modules/axe-core/axe.min.js

browser: ## install Chromium (Debian's) and axe-core (npm) for the browser tests
	@command -v chromium >/dev/null || { command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] \
	  && (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) \
	  || echo "chromium not installed: the browser test will skip (fail under CI=true)"; }
	@[ -f $(AXE) ] || { command -v npm >/dev/null \
	  && npm install --no-audit --no-fund --prefix .venv/axe axe-core@$(AXE_VERSION) >/dev/null \
	  || echo "axe-core not installed: the accessibility test will skip (fail under CI=true)"; }

pgbouncer: ## install Debian's PgBouncer for the pooler test (skipped where apt is absent)
	@command -v pgbouncer >/dev/null || [ -x /usr/sbin/pgbouncer ] || { command -v apt-get >/dev/null \
	  && [ "$$(id -u)" = 0 ] && (apt-get update -qq && apt-get install -y -qq pgbouncer >/dev/null) \
	  || echo "pgbouncer not installed: the pooler test will skip (fail under CI=true)"; }

prometheus: ## install Debian's promtool for the alert rule tests (skipped where apt is absent)
	@command -v promtool >/dev/null || { command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] \
	  && (apt-get update -qq && apt-get install -y -qq prometheus >/dev/null) \
	  || echo "promtool not installed: the alert rule tests will skip (fail under CI=true)"; }

nginx: ## install Debian's nginx for the production-topology test (skipped where apt is absent)
	@command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || { command -v apt-get >/dev/null \
	  && [ "$$(id -u)" = 0 ] && (apt-get update -qq && apt-get install -y -qq nginx >/dev/null) \
	  || echo "nginx not installed: the production test will skip (fail under CI=true)"; }

lint: install ## ruff (lint and format) and mypy
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: install browser pgbouncer prometheus nginx lint ## lint, then the whole suite on SQLite and PostgreSQL
	$(BIN)/pytest -q -p no:cacheprovider

check: lint ## the quick inner loop: lint, types, and the in-process tests on SQLite
	$(BIN)/pytest -q -p no:cacheprovider -m "not slow" -k "not postgresql" $(CHECK_TESTS)

bench: install ## benchmarks against PostgreSQL, printed as ratios to a baseline of the same run
	$(BIN)/python -m bench

clean: ## remove the virtualenv and local data
	rm -rf $(VENV) var
