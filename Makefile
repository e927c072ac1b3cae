# platonic-ta: two commands on a fresh machine.
#   make demo   install, build or load the zoo, run every stage notebook headless, write _runs/report/
#   make test   install, check notebooks and library agree, pytest (every notebook, the library's tests)
#   make paper  the full reproduction: every experiment stage at full cell counts into _runs/paper/ (resumable)
#   make test-lab  the browser test (JupyterLab sliders in headless Chromium) and the composition sweep on Ray
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LAB_STAMP := $(VENV)/.installed-lab
# torch and torchvision are pinned together: the local wheels, a CUDA build that runs on the CPU.
TORCH_PINS := torch==2.14.1 torchvision==0.29.1
NBDEV_PINS := nbdev==2.4.14 execnb==0.1.18 fastcore==1.14.5 ghapi==1.1.1
# Debian's browser for the lab test (driven by playwright through executable_path: no browser download).
CHROMIUM := /usr/bin/chromium
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

.PHONY: install install-lab demo paper test test-lab test-slow sync clean-runs bench

# make test needs no browser: JupyterLab, playwright and Chromium come with install-lab (the demo's slider
# screenshots and make test-lab).
install: $(STAMP)
install-lab: $(LAB_STAMP) $(CHROMIUM)

# Installed once: skipped while the binary exists, and independent of the venv (never forces its reinstall).
$(CHROMIUM):
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium chromium-driver

# Reinstall only when the install inputs change: a second `make test` installs nothing. The lab install is the same
# one pip run with the lab's extras too (a fresh `make demo` installs once), and it stands for the plain install.
$(STAMP): EXTRAS := dev,ray
$(LAB_STAMP): EXTRAS := dev,ray,lab
$(STAMP) $(LAB_STAMP): settings.ini setup.py
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q $(TORCH_PINS)
	$(BIN)/pip install -q $(TORCH_PINS) $(NBDEV_PINS) -e '.[$(EXTRAS)]'
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP) $@

sync: install
	bash tools/check_sync.sh

# pytest runs on two workers (pytest-xdist), one thread each (two would contend for the two cores); tests that time
# processes of their own run after, one at a time.
# Every notebook runs inside pytest: the stage notebooks as papermill smoke runs, the others under nbdev_test.
# Everything a run writes to a temporary folder (pytest's, the notebooks', the cache) lands in one folder, removed at
# the end whatever the outcome: a test worker exits without running its notebooks' clean-ups.
test: install sync
	d=$$(mktemp -d) && mkdir $$d/tmp && export PLATONIC_TA_TEST_CACHE=$$d/cache TMPDIR=$$d/tmp && \
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q tests --ignore=tests/lab -m 'not serial' -n 2 --dist loadgroup && \
	$(BIN)/python -m pytest -q tests --ignore=tests/lab -m serial; rc=$$?; rm -rf $$d; exit $$rc

# JupyterLab in a headless Chromium, and a sweep of the composition notebook killed halfway and finished on Ray.
test-lab: install-lab
	d=$$(mktemp -d) && export TMPDIR=$$d && $(BIN)/python -m pytest -q tests/lab; rc=$$?; rm -rf $$d; exit $$rc

# The heavy checks nbdev skips by default (cells flagged `#| slow`); their temporary files go as make test's do.
test-slow: install
	d=$$(mktemp -d) && export TMPDIR=$$d && $(BIN)/nbdev_test --n_workers 1 --flags slow && \
	PLATONIC_TA_SLOW=1 $(BIN)/python -m pytest -q tests -m slow; rc=$$?; rm -rf $$d; exit $$rc

demo: install-lab
	$(BIN)/platonic-ta demo

# A killed run is resumed by running it again: finished stages are kept (WORKERS stages side by side).
WORKERS ?= 2
paper: install
	$(BIN)/platonic-ta paper --workers $(WORKERS)

bench: install
	$(BIN)/python bench/bank48.py

clean-runs:
	rm -rf _runs
