# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
RUNTIME_STAMP := $(VENV)/.installed-runtime
STAMP  := $(VENV)/.installed

# Debian packages, one PACKAGE:COMMAND per package (COMMAND on PATH shows it is there), in a
# list per purpose: add a package to the list of what uses it. `make demo` installs the demo's
# only; `make test` (and test-fast) the tests'. As root with apt-get they are installed
# (scripts/apt-need: apt waits up to APT_LOCK_WAIT seconds for another apt's lock); elsewhere,
# or for a package apt cannot have, a warning names them and what needs them skips.
# The demo: perf, and a C compiler for its example.
DEMO_PKGS := linux-perf:perf gcc:cc
# The tests: a headless browser (flame graph SVG, web pages), Graphviz (callgraph), valgrind
# (memory, the trace flame graph's reference counts), QEMU user mode and a RISC-V cross compiler
# (instruction traces for `flamegraph --trace`), and for the PMU lane (tests/pmu_lane: an Arm
# kernel with a real PMU) QEMU's system emulator, mmdebstrap (its root filesystem) and an
# aarch64 assembler, linker and C compiler (its loop program, its region example).
TEST_PKGS := $(DEMO_PKGS) chromium:chromium graphviz:dot valgrind:valgrind \
             qemu-user:qemu-x86_64 gcc-riscv64-linux-gnu:riscv64-linux-gnu-gcc \
             qemu-system-arm:qemu-system-aarch64 mmdebstrap:mmdebstrap \
             binutils-aarch64-linux-gnu:aarch64-linux-gnu-as \
             gcc-aarch64-linux-gnu:aarch64-linux-gnu-gcc
APT_LOCK_WAIT ?= 600
export APT_LOCK_WAIT

.PHONY: install launcher helpcache system-deps demo-deps test-deps test test-fast test-pmu lint bench demo clean

# The package and what the tests and linters use (pytest, ruff, mypy, Playwright). pip compiles
# what it installs, not an editable install's own source: compiled here (at once, and again for
# what changed since), or an environment that sets PYTHONDONTWRITEBYTECODE compiles every module
# of autoprof at every start (0.17 s of a profile's 0.5 s).
install: $(STAMP) launcher
	@$(PY) -m compileall -q -j 0 autoprof
	@$(PY) -c 'from autoprof.cli import write_help_cache as w; w()'

# `autoprof COMMAND --help` printed without importing click (autoprof/commands/helpcache.py):
# click's texts, written again whenever what they were rendered from has changed.
helpcache: $(RUNTIME_STAMP)
	@$(PY) -c 'from autoprof.cli import write_help_cache as w; w()'

# The native launcher (autoprof/perf/launcher.c): it starts each run's workload held at its exec
# for ~2 ms less CPU and ~4 ms less wall time per run than Python's fork. Built where a C
# compiler is (`make demo` and the tests install gcc): with no C library where it can
# (LAUNCHER_BARE: x86_64, aarch64), else static, else as the compiler can; without a compiler
# autoprof forks from Python, with the same counts.
LAUNCHER := autoprof/perf/launcher-$(shell uname -m)
LAUNCHER_FLAGS := -O2 -Wall -Wextra
LAUNCHER_BARE := -static -nostdlib -ffreestanding -fno-stack-protector \
                 -fno-tree-loop-distribute-patterns -DAUTOPROF_NOLIBC
launcher:
	@if [ -f $(LAUNCHER) ] && [ $(LAUNCHER) -nt autoprof/perf/launcher.c ]; then :; \
	elif command -v $(CC) >/dev/null 2>&1; then \
	  { $(CC) $(LAUNCHER_FLAGS) $(LAUNCHER_BARE) -o $(LAUNCHER).tmp autoprof/perf/launcher.c \
	    || $(CC) $(LAUNCHER_FLAGS) -static -o $(LAUNCHER).tmp autoprof/perf/launcher.c \
	    || $(CC) $(LAUNCHER_FLAGS) -o $(LAUNCHER).tmp autoprof/perf/launcher.c; } 2>/dev/null \
	  && mv -f $(LAUNCHER).tmp $(LAUNCHER) \
	  || echo "note: autoprof/perf/launcher.c does not compile: autoprof forks from Python"; \
	else echo "note: no C compiler ($(CC)): autoprof starts workloads from Python (slower)"; fi

# pip runs with -qq: one -q still prints each warning (a find-links folder it cannot read, the
# build backend's banner on editable installs: ~50 lines in `make demo`); errors still show.
$(STAMP): $(RUNTIME_STAMP)
	@echo "make: installing the tests' and linters' packages into $(VENV)"
	@$(PY) -m pip install -qq -e '.[dev]'
	@touch $@

# The package alone: what `make demo` needs.
$(RUNTIME_STAMP): pyproject.toml
	@echo "make: installing autoprof into $(VENV) (a minute or two the first time)"
	@$(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -qq --upgrade pip
	@$(PY) -m pip install -qq -e .
	@$(PY) -m compileall -q -j 0 autoprof
	@touch $@

demo-deps:
	@sh scripts/apt-need $(DEMO_PKGS)

test-deps:
	@sh scripts/apt-need $(TEST_PKGS)

system-deps: test-deps

# pytest keeps its assertion-rewritten test modules in __pycache__; where the environment sets
# PYTHONDONTWRITEBYTECODE it rewrites and compiles every module again on each run (~15 s).
PYTEST := PYTHONDONTWRITEBYTECODE= $(PY) -m pytest

test: install test-deps launcher
	$(PYTEST) -q

# Everything but the tests marked slow (real profiles, workers), on two processes (pytest-xdist;
# the fast tests share nothing: own tmp paths, databases, Redis indexes): ~75 s on two cores.
test-fast: install test-deps launcher
	$(PYTEST) -q -m "not slow" -n 2

# The PMU lane alone: builds (once, cached in $XDG_CACHE_HOME/autoprof-pmu-lane) and boots a
# Debian 12 arm64 kernel under qemu-system-aarch64 -icount shift=0; `make test` runs it too.
test-pmu: install test-deps launcher
	$(PYTEST) -q tests/test_pmu_lane.py

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

bench: install
	@for b in bench/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

demo: $(RUNTIME_STAMP) demo-deps launcher helpcache
	$(VENV)/bin/autoprof demo

clean:
	rm -rf $(VENV) out .pytest_cache .ruff_cache autoprof/perf/launcher-* \
	  autoprof/commands/help.cache
