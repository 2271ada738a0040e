"""Installing autoprof: the Debian packages `make demo` and `make test` ask scripts/apt-need
for (apt waits for another apt's lock; a package apt cannot have only skips what needs it), pip
kept quiet, and pyproject's metadata."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).parents[1]
FAKE_APT = """#!/bin/sh
echo "$*" >> "$LOG"
case "$*" in
  *update*) [ -e "$LOG.held" ] && exit 0
            touch "$LOG.held"; echo "E: Could not get lock /var/lib/apt/lists/lock" >&2; exit 100 ;;
  *nosuch-pkg*) exit 100 ;;
esac
exit 0
"""


def _apt_need(tmp_path: Path, uid: int, *pairs: str) -> tuple[subprocess.CompletedProcess, str]:
    """scripts/apt-need with a fake apt-get and id on PATH; (the run, apt-get's calls)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "apt-get").write_text(FAKE_APT)
    (bin_dir / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    for tool in ("apt-get", "id"):
        (bin_dir / tool).chmod(0o755)
    log = tmp_path / "apt.log"
    log.write_text("")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "LOG": str(log), "APT_LOCK_WAIT": "7"}
    proc = subprocess.run(
        ["sh", str(REPO / "scripts" / "apt-need"), *pairs], env=env, capture_output=True, text=True
    )
    return proc, log.read_text()


def test_apt_waits_for_the_lock_and_a_missing_package_only_skips_its_tests(tmp_path):
    proc, calls = _apt_need(tmp_path, 0, "sh:sh", "nosuch-pkg:no-such-cmd", "other-pkg:no-cmd2")
    assert proc.returncode == 0  # the make goes on
    lines = calls.splitlines()
    assert all("-o DPkg::Lock::Timeout=7" in line for line in lines)
    assert not any(" sh" in line.split("install")[-1] for line in lines if "install" in line)
    assert any(line.endswith("install nosuch-pkg other-pkg") for line in lines)  # all at once
    assert calls.count("update") == 2  # another apt held the lists: waited, then updated
    assert lines[-1].endswith("install other-pkg")
    assert "warning: cannot install nosuch-pkg" in proc.stderr
    assert "other-pkg" not in proc.stderr


def test_without_root_apt_need_only_names_what_is_missing(tmp_path):
    proc, calls = _apt_need(tmp_path, 1000, "sh:sh", "valgrind:no-such-valgrind")
    assert proc.returncode == 0 and calls == ""
    assert "not installed: valgrind" in proc.stderr


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_demo_installs_only_what_the_demo_uses():
    """`make demo` asks for perf and a C compiler only; `make test` keeps the tests' list."""
    demo = subprocess.run(["make", "-n", "demo"], cwd=REPO, capture_output=True, text=True)
    [needs] = [line for line in demo.stdout.splitlines() if "apt-need" in line]
    assert needs.split("apt-need")[1].split() == ["linux-perf:perf", "gcc:cc"]
    assert "[dev]" not in demo.stdout  # nor pytest, mypy, Playwright
    test = subprocess.run(["make", "-n", "test"], cwd=REPO, capture_output=True, text=True)
    [needs] = [line for line in test.stdout.splitlines() if "apt-need" in line]
    assert {"linux-perf:perf", "chromium:chromium", "valgrind:valgrind"} <= set(needs.split())


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_demo_on_a_fresh_machine_keeps_pip_quiet(tmp_path):
    """Issue #41: one -q still let pip print ~50 warnings and setuptools' editable-install
    banner during `make demo`; -qq keeps its errors only."""
    fresh = f"VENV={tmp_path / 'venv'}"
    demo = subprocess.run(["make", "-n", "demo", fresh], cwd=REPO, capture_output=True, text=True)
    pips = [line for line in demo.stdout.splitlines() if " pip " in line]
    assert len(pips) == 2 and all(" install -qq " in line for line in pips), pips
    said = [line for line in demo.stdout.splitlines() if line.startswith("echo ")]
    assert said and "installing autoprof" in said[0]


def test_the_package_license_is_an_spdx_string():
    """pip warned on every install that a TOML table license is deprecated (PEP 639)."""
    import tomllib

    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert project["project"]["license"] == "MIT"
