# jobpost: `make run` starts everything on embedded defaults; `make test` runs the whole suite.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.DEFAULT_GOAL := help
.PHONY: help install run test lint bench browser clean

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "jobpost needs Python 3.11+"'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	rm -f $(VENV)/.installed-* && touch $@

install: $(STAMP) ## create .venv and install jobpost with its test tools

run: install ## migrate, issue the demo key, start web + worker + beat + mail sink
	$(BIN)/jobpost db upgrade
	$(BIN)/jobpost demo
	$(BIN)/jobpost dev

browser: ## install Debian's Chromium for the browser test (skipped where apt is absent)
	@command -v chromium >/dev/null || { command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] \
	  && (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) \
	  || echo "chromium not installed: the browser test will skip (fail under CI=true)"; }

lint: install ## ruff (lint and format) and mypy
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: install browser lint ## lint, then the whole suite on SQLite and PostgreSQL
	$(BIN)/pytest -q -p no:cacheprovider

bench: install ## benchmarks against PostgreSQL, printed as ratios to a baseline of the same run
	$(BIN)/python -m bench

clean: ## remove the virtualenv and local data
	rm -rf $(VENV) var
