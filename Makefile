# Build, execute and test the companion book.  Run `make` (or `make help`) for the list of targets.
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
# A failed recipe deletes its target: a notebook that raised leaves no executed copy behind.
.DELETE_ON_ERROR:
.DEFAULT_GOAL := help
MAKEFLAGS += --no-builtin-rules

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

# Notebook parameters: PRESET picks the library's named configuration, PARAMS is passed to papermill
# as is, e.g.  make execute PRESET=paper PARAMS='-p force True -y "seeds: [100, 101]"'
PRESET ?= quick
PARAMS ?=
# Processes for the tests and the smoke notebooks (one per core by default).
JOBS ?= $(shell nproc 2>/dev/null || echo 1)
# JAX's persistent compilation cache for notebooks and tests (not for `make bench`, which times compilation):
# a program compiled once, by any notebook, test or worker process, is loaded instead of compiled again.
JAX_CACHE := JAX_COMPILATION_CACHE_DIR=$(CURDIR)/_build/jax-cache
ifneq ($(filter-out smoke quick paper,$(PRESET))$(words $(PRESET)),1)
  $(error PRESET='$(PRESET)' is not a preset; use one of: smoke | quick | paper)
endif

NOTEBOOKS := $(notdir $(basename $(wildcard book/*.py)))
# The results-at-a-glance page reads what the chapters stored, so it runs after them; the appendix "Running it
# yourself" draws the measurements recorded under book/records/, and the teacher-student chapter and the results page
# the paper-scale ledger's state there, so a new record executes them again.
CHAPTERS  := $(filter-out results,$(NOTEBOOKS))
RECORDS   := $(shell find book/records -name '*.json' 2>/dev/null)
# The one place the repository address is written is _config.yml; Colab installs compgen from it.
REPOSITORY := $(shell sed -n 's/^  url: *//p' _config.yml | head -1)
# Colab installs the commit a notebook was executed at: <address>@<commit> (the address alone outside git); it is
# not one of the recorded arguments (.params), so a new commit alone does not re-execute the notebooks.
COMMIT     := $(shell git rev-parse HEAD 2>/dev/null)
INSTALL_FROM := $(REPOSITORY)$(if $(COMMIT),@$(COMMIT))
# Every file of the library: changing any of them re-executes the notebooks.
SRC := $(shell find src -type f -not -path '*/__pycache__/*' -not -path '*.egg-info/*' 2>/dev/null)

INSTALL_STAMP := $(VENV)/.installed
# Headless Chromium for the book check's math test (Debian's package; installed by `make install` if missing).
CHROMIUM      := $(shell command -v chromium 2>/dev/null || echo /usr/bin/chromium)
NPM_STAMP     := node_modules/.package-lock.json
MATHJAX       := _vendor/mathjax/tex-mml-chtml.js
# --all: a fresh Sphinx environment each time; otherwise a page that warned is not re-read on the
# next build, and that build passes --warningiserror although nothing was fixed.
JB_BUILD      := $(BIN)/jupyter-book build --all --warningiserror --keep-going

# The smoke-test book is staged in its own folder so that `make test` never touches the
# executed notebooks or HTML of the default book.
SMOKE        := _build/smoke
SMOKE_STATIC := $(addprefix $(SMOKE)/,_config.yml _toc.yml \
                  $(shell find book -type f -not -path '*/.*' -not -name '*.py' -not -name '*.ipynb'))

.PHONY: help install execute book check-book test test-unit test-lanes test-book lint bench sweep twin-env twin bench-authors clean distclean FORCE

help: ## list the targets
	@echo "usage: make <target> [PRESET=smoke|quick|paper] [PARAMS=\"-p name value ...\"]"
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

# ---------------------------------------------------------------------------------------------
# Environment: a virtualenv from the lock file, and MathJax from npm served from _vendor/.

install: $(INSTALL_STAMP) $(MATHJAX) $(CHROMIUM) ## create .venv (pip, lock file), vendor MathJax (npm), Chromium (apt)

$(INSTALL_STAMP): requirements-lock.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --disable-pip-version-check -q -r requirements-lock.txt -e .
	touch $@

$(CHROMIUM):
	@if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null; then SUDO=sudo; else \
	  echo "make install: Chromium is missing and needs root: apt-get install chromium"; exit 1; fi; \
	  $$SUDO apt-get install -y --no-install-recommends chromium >/dev/null || \
	  { $$SUDO apt-get update >/dev/null && $$SUDO apt-get install -y --no-install-recommends chromium >/dev/null; }

$(NPM_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $@

$(MATHJAX): $(NPM_STAMP)
	rm -rf _vendor/mathjax
	mkdir -p _vendor/mathjax
	cp -R node_modules/mathjax/es5/{tex-mml-chtml.js,input,a11y,ui,sre,output} _vendor/mathjax/

# ---------------------------------------------------------------------------------------------
# Notebook execution.  $(call execute_rules,DIR,ARGS,ENV) defines how book/NAME.py becomes the executed
# notebook DIR/NAME.ipynb, with the papermill arguments held in the variable named ARGS and the
# environment assignments ENV (the smoke book keeps its results store to itself).  The
# arguments are recorded in DIR/.params, which is rewritten only when they change, so a new preset
# or new PARAMS re-run every notebook of DIR while an unchanged call does nothing.  Conversion is
# one-way: an executed notebook is never synced back to its .py source.
define execute_rules
$(1)/%.ipynb: book/%.py $$(SRC) $(1)/.params | $$(INSTALL_STAMP) $$(KERNEL_CONFIG)
	@mkdir -p $$(@D)
	$$(BIN)/jupytext --to ipynb --output - $$< \
	  | XLA_PYTHON_CLIENT_PREALLOCATE=false IPYTHONDIR=$$(CURDIR)/$$(IPYTHON_DIR) $$(JAX_CACHE) $(3) \
	    $$(BIN)/papermill - $$@ \
	      --cwd book -k python3 --language python --no-progress-bar --log-output $$($(2)) \
	      -p repository $$(INSTALL_FROM)
	$$(BIN)/python tools/tidy_notebook.py $$@

$(1)/results.ipynb: $$(CHAPTERS:%=$(1)/%.ipynb)
$(1)/running.ipynb $(1)/teacher_student.ipynb $(1)/results.ipynb: $$(RECORDS)
$(1)/own_learner.ipynb: $(1)/hyperteacher.ipynb $(1)/goals.ipynb  # compares with their stored runs

$(1)/.params: export NB_ARGS = $$($(2))
$(1)/.params: FORCE
	@mkdir -p $$(@D)
	@printf '%s\n' "$$$$NB_ARGS" | cmp -s - $$@ || printf '%s\n' "$$$$NB_ARGS" > $$@
endef

# The kernels' IPython profile: what C++ writes to the process's stderr (XLA's "Very slow compile?" alarm and other
# log lines) goes to the build's log, not into the executed notebook; the chapters print their own progress.
IPYTHON_DIR   := _build/ipython
KERNEL_CONFIG := $(IPYTHON_DIR)/profile_default/ipython_kernel_config.py
$(KERNEL_CONFIG):
	@mkdir -p $(@D)
	echo "c.IPKernelApp.capture_fd_output = False" > $@

BOOK_ARGS  = -p preset $(PRESET) $(PARAMS)
SMOKE_ARGS = -p preset smoke
$(eval $(call execute_rules,book,BOOK_ARGS))
$(eval $(call execute_rules,$(SMOKE)/book,SMOKE_ARGS,COMPGEN_RESULTS=$(CURDIR)/$(SMOKE)/results))

execute: $(NOTEBOOKS:%=book/%.ipynb) ## run every book/*.py with papermill at PRESET (default quick)

book: execute $(INSTALL_STAMP) $(MATHJAX) ## execute, then build the HTML into _build/html
	$(JB_BUILD) .
	@echo "open _build/html/index.html"

check-book: $(INSTALL_STAMP) ## check the built book as a reader sees it (tables, admonitions, headings, figures, math)
	$(BIN)/python tools/check_book.py _build/html --sources book
	@if [ -d $(SMOKE)/_build/html ]; then \
	  $(BIN)/python tools/check_prose.py book --quick _build/html --smoke $(SMOKE)/_build/html; \
	else echo "check-prose: no smoke build ($(SMOKE)/_build/html; make test builds it): the two builds not compared"; fi

# ---------------------------------------------------------------------------------------------
# Tests: unit tests, then every notebook at the smoke preset built into a book of its own.

test: lint test-unit test-lanes test-book ## lint + unit tests (and again as an accelerator trains) + smoke book, checked

lint: $(INSTALL_STAMP) ## ruff on src/, tests/, book/ and tools/; no result typed in the book's prose
	$(BIN)/ruff check src tests book tools
	$(BIN)/ruff format --check src tests book tools
	$(BIN)/python tools/check_prose.py book

test-unit: $(INSTALL_STAMP) ## pytest only (one worker process per core, a test file per worker at a time)
	$(JAX_CACHE) $(BIN)/python -m pytest -q -n $(JOBS) --dist loadfile tests

test-lanes: $(INSTALL_STAMP) ## the runner's tests again on the path an accelerator takes: lanes, one worker, in-process
	COMPGEN_LANES=1 COMPGEN_WORKERS=1 COMPGEN_SHARD_TASKS=0 $(JAX_CACHE) $(BIN)/python -m pytest -q -n $(JOBS) \
		--dist loadfile tests/test_runner.py tests/backends tests/test_sweeps.py tests/experiments

test-book: $(INSTALL_STAMP) $(SMOKE_STATIC) $(SMOKE)/_vendor $(CHROMIUM) ## smoke notebooks (JOBS at once) + book + its check
	COMPGEN_WORKERS=1 $(MAKE) --no-print-directory -j$(JOBS) $(NOTEBOOKS:%=$(SMOKE)/book/%.ipynb)
	$(JB_BUILD) $(SMOKE)
	$(BIN)/python tools/check_book.py $(SMOKE)/_build/html --sources book

$(SMOKE_STATIC): $(SMOKE)/%: %
	@mkdir -p $(@D)
	cp $< $@

$(SMOKE)/_vendor: | $(MATHJAX)
	@mkdir -p $(@D)
	ln -sfn ../../_vendor $@

# ---------------------------------------------------------------------------------------------

bench: $(INSTALL_STAMP) ## the library's benchmarks, then where the executed book's time went and its budget check
	$(BIN)/python -m compgen.bench
	$(BIN)/python -m compgen.bench --keys quick
	$(BIN)/python -m compgen.bench --book book --check-budget

# make sweep SWEEP=sweeps/<folder>/<name>.toml [BACKEND=local|devices|ray] [PRESET=...] [SWEEP_ARGS="--dry-run"]
# PRESET is passed on only when given; otherwise the sweep file's own preset (paper) is used.
SWEEP   ?=
BACKEND ?= local
sweep: $(INSTALL_STAMP) ## train the runs of a sweep file not yet stored: make sweep SWEEP=sweeps/... BACKEND=local
	@test -n "$(SWEEP)" || { echo "usage: make sweep SWEEP=sweeps/<folder>/<name>.toml [BACKEND=local|devices|ray]"; exit 2; }
	$(BIN)/compgen-cli sweep $(SWEEP) --backend $(BACKEND) \
	  $(if $(filter command line environment,$(origin PRESET)),--preset $(PRESET)) $(SWEEP_ARGS)

# Twin runs with the authors' implementation (tools/twin.py): REFERENCE is a checkout of
# smonsays/modular-hyperteacher at the commit tools/twin.py names; it stays outside this repository.
REFERENCE ?=
TWIN_VENV := .venv-twin
# default: the chapter's own seeds and the second set, 31-33 (e.g. TWIN_SEEDS='--seeds 31 32 33' for one set)
TWIN_SEEDS ?=
CHAPTER ?= hyperteacher
twin-env: ## a separate virtualenv (.venv-twin) with the reference's dependencies: make twin-env REFERENCE=<checkout>
	@test -n "$(REFERENCE)" -a -f "$(REFERENCE)/run_fewshot.py" || { echo "usage: make twin-env REFERENCE=<checkout of smonsays/modular-hyperteacher>"; exit 2; }
	$(PYTHON) -m venv $(TWIN_VENV)
	$(TWIN_VENV)/bin/pip install -q -r tools/twin-requirements.txt
	@echo "twin environment ready: $(TWIN_VENV) (reference at $(REFERENCE))"

# BENCH_ARGS go to tools/bench_authors.py, e.g. BENCH_ARGS='--only "hyperteacher hnet_linear" --record'
BENCH_ARGS ?=
bench-authors: $(INSTALL_STAMP) ## time the authors' step and ours alternately on a CPU: make bench-authors REFERENCE=<checkout> [BENCH_ARGS=--record]
	@test -x $(TWIN_VENV)/bin/python || { echo "run make twin-env REFERENCE=<checkout> first"; exit 2; }
	@test -n "$(REFERENCE)" -a -f "$(REFERENCE)/run_fewshot.py" || { echo "usage: make bench-authors REFERENCE=<checkout of smonsays/modular-hyperteacher>"; exit 2; }
	$(BIN)/python tools/bench_authors.py --reference "$(REFERENCE)" --twin-python $(TWIN_VENV)/bin/python $(BENCH_ARGS)

twin: $(INSTALL_STAMP) ## train a chapter's claim configs with the reference: make twin REFERENCE=<checkout> [CHAPTER=hyperteacher] [TWIN_ARGS="--jobs 2"]
	@test -x $(TWIN_VENV)/bin/python || { echo "run make twin-env REFERENCE=<checkout> first"; exit 2; }
	$(BIN)/python tools/twin.py --reference "$(REFERENCE)" --python $(TWIN_VENV)/bin/python --chapter $(CHAPTER) $(TWIN_SEEDS) $(TWIN_ARGS)

clean: ## remove executed notebooks and _build (keeps .venv and results/)
	rm -rf _build book/*.ipynb book/.params

distclean: clean ## also remove .venv, node_modules and _vendor
	rm -rf $(VENV) $(TWIN_VENV) node_modules _vendor .pytest_cache src/*.egg-info

FORCE:
