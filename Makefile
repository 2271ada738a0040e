# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# Debian packages the tests use: perf, a C compiler, a headless browser for the flame-graph SVG,
# Graphviz (callgraph), valgrind (memory, and the trace flame graph's reference counts),
# QEMU user mode and a RISC-V cross compiler (instruction traces for `flamegraph --trace`), and
# for the PMU lane (tests/pmu_lane: an Arm kernel with a real PMU) QEMU's system emulator,
# mmdebstrap (its root filesystem) and an aarch64 assembler and linker (its loop program).
APT_PKGS := linux-perf gcc chromium graphviz valgrind qemu-user gcc-riscv64-linux-gnu \
	qemu-system-arm mmdebstrap binutils-aarch64-linux-gnu
APT_BINS := perf cc chromium dot valgrind qemu-x86_64 riscv64-linux-gnu-gcc \
	qemu-system-aarch64 mmdebstrap aarch64-linux-gnu-as

.PHONY: install system-deps test test-fast test-pmu lint bench demo clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

# Installs missing Debian packages when we may (root + apt); otherwise the tests that need
# them skip with a reason.
system-deps:
	@missing=""; for b in $(APT_BINS); do command -v $$b >/dev/null 2>&1 || missing="$$missing $$b"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian packages for:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_PKGS) >/dev/null; \
	  else echo "warning: missing$$missing (tests that need them will skip)"; fi; \
	fi

# pytest keeps its assertion-rewritten test modules in __pycache__; where the environment sets
# PYTHONDONTWRITEBYTECODE it rewrites and compiles every module again on each run (~15 s).
PYTEST := PYTHONDONTWRITEBYTECODE= $(PY) -m pytest

test: install system-deps
	$(PYTEST) -q

# Everything but the tests marked slow (real profiles, workers): under a minute, on two
# processes (pytest-xdist; the fast tests share nothing: own tmp paths, databases, Redis indexes).
test-fast: install system-deps
	$(PYTEST) -q -m "not slow" -n 2

# The PMU lane alone: builds (once, cached in $XDG_CACHE_HOME/autoprof-pmu-lane) and boots a
# Debian 12 arm64 kernel under qemu-system-aarch64 -icount shift=0; `make test` runs it too.
test-pmu: install system-deps
	$(PYTEST) -q tests/test_pmu_lane.py

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

bench: install
	@for b in bench/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

demo: install system-deps
	$(VENV)/bin/autoprof demo

clean:
	rm -rf $(VENV) out .pytest_cache .ruff_cache
