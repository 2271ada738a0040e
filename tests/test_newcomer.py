"""Issue #29, "the first ten minutes": what a newcomer met on a fresh clone, each now one clear
line (or a working answer) instead of a surprise."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from autoprof.testing.cli import one_error_line


@pytest.mark.parametrize("text", ["", "\n\n", "# my events\n   # none yet\n"])
def test_an_events_file_that_names_no_event_is_an_error(cli_run, tmp_path, text):
    """Not "every event": that would be the longest profile the machine offers."""
    events = tmp_path / "events.txt"
    events.write_text(text)
    commands = (["profile", "--dry-run"], ["bench", "-n", "2"], ["submit", "--host", "nowhere"])
    for command in commands:
        line = one_error_line(cli_run(*command, "--events", events, "--", "true"))
        assert "names no event" in line and str(events) in line


# --- aggregate: a corrupt manifest, garbage perf.csv files --------------------------------------

PROFILE = Path(__file__).parent / "data" / "profile-ed64973"  # a real profile (its README)
GARBAGE = {
    "text": b"hello world\nthis is not perf\n",
    "bytes": bytes(range(1, 256)) * 8,  # \r, quotes, separators: once "pandas read 18 lines"
    "zeros": b"\x00" * 4096 + b"\n",
}


@pytest.mark.parametrize("manifest", ["{bad", "", None])
def test_aggregate_of_a_corrupt_manifest_fails_and_keeps_everything(cli_run, tmp_path, manifest):
    """Without its plan nothing says which runs were expected ("runs ok 2 of ?", rc 0): one
    line, status 2, and the folder as it was (an earlier results.csv and report.json too)."""
    out = tmp_path / "out"
    shutil.copytree(PROFILE, out)
    if manifest is None:
        (out / "manifest.json").unlink()
    else:
        (out / "manifest.json").write_text(manifest)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    line = one_error_line(cli_run("aggregate", out))
    assert "manifest" in line and "nothing aggregated" in line and str(out / "runs") in line
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    upload = one_error_line(cli_run("upload", out, "--store", tmp_path / "s.db"))
    assert "manifest" in upload


def _garbled(tmp_path: Path, kinds: list[str | None]) -> Path:
    """The recorded profile's first run, repeated once per kind (None: its real perf.csv)."""
    out = tmp_path / "out"
    shutil.copytree(PROFILE, out)
    (out / "results.csv").unlink()
    (out / "report.json").unlink()
    real = next((out / "runs").iterdir())
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["options"]["repeat"] = len(kinds)
    manifest["plan"]["runs"] = manifest["plan"]["runs"][:1]  # its run 2 never finished
    (out / "manifest.json").write_text(json.dumps(manifest))
    for repeat, kind in enumerate(kinds, 1):
        folder = out / "runs" / f"run0001-rep{repeat}"
        if repeat > 1:
            shutil.copytree(real, folder)
            record = json.loads((folder / "run.json").read_text())
            (folder / "run.json").write_text(json.dumps(dict(record, repeat=repeat)))
        if kind is not None:
            (folder / "perf.csv").write_bytes(GARBAGE[kind])
    return out


def test_garbage_perf_csv_files_are_broken_runs_with_a_reason(cli_run, tmp_path):
    """Three runs of garbage: "runs ok 3 of 3" said before, with pandas' line count as the
    reason. Now each run is broken, in words about the file."""
    out = _garbled(tmp_path, list(GARBAGE))
    run = cli_run("aggregate", out)
    assert run.returncode == 2
    assert "0 of 3 runs ok, 3 broken" in run.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["runs"]["ok"] == 0
    assert [b["repeat"] for b in report["runs"]["broken"]] == [1, 2, 3]
    for broken in report["runs"]["broken"]:
        assert broken["reason"].startswith("perf.csv holds no count of perf's: ")
    assert "pandas" not in json.dumps(report)
    assert report["events"]["not_counted"] == []  # the files are at fault, not the events
    assert "runs broken" in run.stdout


def test_one_broken_run_leaves_the_others_ok(cli_run, tmp_path):
    out = _garbled(tmp_path, [None, "text", None])
    run = cli_run("aggregate", out)
    assert run.returncode == 3, run.stderr  # written, one run skipped (#41)
    assert "skipped 1 broken run (run 1 rep 2: " in run.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["runs"]["ok"] == 2 and report["runs"]["finished"] == 3
    assert [(b["run"], b["repeat"]) for b in report["runs"]["broken"]] == [(1, 2)]
    assert "line 1: 1 fields" in report["runs"]["broken"][0]["reason"]


# --- serve on a busy port; runs delete without a terminal ---------------------------------------


def test_serve_on_a_busy_port_is_one_line_before_any_banner(cli_run, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = cli_run("serve", "--port", str(port), "--store", tmp_path / "s.db")
    assert proc.returncode == 2 and proc.stdout == ""  # no banner first
    line = one_error_line(proc)
    assert f"cannot listen on 127.0.0.1 port {port}: Address already in use" in line
    assert "--port" in line


def test_runs_delete_without_a_terminal_is_refused_in_one_line(cli_run, tmp_path):
    store = f"sqlite:///{tmp_path / 's.db'}"
    out = tmp_path / "out"
    shutil.copytree(PROFILE, out)
    assert cli_run("upload", out, "--store", store).returncode == 0
    run_id = json.loads((out / "manifest.json").read_text())["id"]
    proc = cli_run("runs", "delete", run_id, "--store", store)  # its input is no terminal
    assert proc.returncode == 2 and proc.stdout == ""
    line = one_error_line(proc)
    assert run_id in line and "no terminal" in line and "--yes" in line
    assert run_id in cli_run("runs", "list", "--store", store).stdout  # kept


# --- messages ------------------------------------------------------------------------------------


def test_aggregate_to_a_path_that_cannot_be_written_names_that_path(cli_run, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(PROFILE, out)
    target = tmp_path / "no-such-folder" / "results.csv"
    line = one_error_line(cli_run("aggregate", out, "-o", target))
    assert f"{target}: No such file or directory" in line and ".partial" not in line


@pytest.mark.needs_perf
def test_a_bad_output_folder_fails_before_the_profiling_banner(cli_run, tmp_path):
    (tmp_path / "file").write_text("")
    line = one_error_line(cli_run("profile", "-e", "task-clock", "-o", tmp_path / "file" / "o",
                                  "--", "true"))  # fmt: skip
    assert f"{tmp_path / 'file'}: Not a directory" in line
    first = tmp_path / "first"
    assert cli_run("profile", "-e", "task-clock", "-o", first, "--", "true").returncode == 0
    again = one_error_line(cli_run("profile", "-e", "task-clock", "-o", first, "--", "ls"))
    assert "holds a profile of another command" in again


@pytest.mark.needs_perf
@pytest.mark.slow  # a real profile that waits for its timeout
def test_a_single_run_that_times_out_says_so(cli_run, tmp_path):
    run = cli_run("profile", "-e", "task-clock", "--timeout", "1", "-o", tmp_path / "out",
                  "--", "sleep", "60")  # fmt: skip
    assert run.returncode == 2
    error = run.stderr.strip().splitlines()[-1]
    assert error == (
        "autoprof: error: the run failed (timed out after --timeout 1 s: perf and the command "
        f"were stopped); its output is kept in {tmp_path / 'out'}/"
    )
    assert "next:" not in run.stderr  # nothing to aggregate


@pytest.mark.needs_perf
def test_record_of_a_missing_command_says_it_once(cli_run, tmp_path):
    line = one_error_line(cli_run("record", "-o", tmp_path / "rec", "--", "nosuchprog"))
    assert line == "autoprof: error: command not found: nosuchprog"


@pytest.mark.needs_perf
@pytest.mark.slow  # attaches to a real process for its duration
def test_a_one_run_attached_profile_does_not_warn_about_moments(cli_run, tmp_path):
    with subprocess.Popen(["sleep", "60"]) as target:
        try:
            run = cli_run("profile", "-p", target.pid, "--duration", "0.3", "-e", "task-clock",
                          "-o", tmp_path / "out")  # fmt: skip
        finally:
            target.kill()
    assert run.returncode == 0, run.stderr
    assert "different moment" not in run.stderr


def test_a_cpu_without_metrics_points_at_the_shipped_software_metrics(cli_run):
    line = one_error_line(cli_run("schedule", "--cpu", "a64fx", "--metrics", "all"))
    assert "--metrics-file software" in line
    here = cli_run("schedule", "--metrics", "all", "--metrics-file", "software")
    assert here.returncode == 0, here.stderr  # this machine's software events


@pytest.mark.parametrize("group", [[], ["events"], ["runs"], ["store"], ["jobs"], ["analyze"],
                                   ["metrics"]])  # fmt: skip
def test_help_lists_every_summary_whole(cli_run, group):
    """Each command's help opens with a one-line summary short enough for an 80-column
    listing: click cut every long first sentence with "..."."""
    listing = cli_run(*group, "--help").stdout.split("Commands:")[1]
    rows = [line for line in listing.splitlines() if line.strip()]
    assert rows and not [row for row in rows if row.endswith("...")], listing
    assert all(row.rstrip().endswith(".") for row in rows), listing


# --- consistency -------------------------------------------------------------------------------


def test_runs_show_quotes_the_command_as_list_and_web_do(cli_run, tmp_path):
    from autoprof.testing.synthetic_out import make_out

    store = f"sqlite:///{tmp_path / 's.db'}"
    out = make_out(tmp_path / "out", command=("sh", "-c", "echo hi there"))
    assert cli_run("upload", out, "--store", store).returncode == 0
    run_id = json.loads((out / "manifest.json").read_text())["id"]
    shown = cli_run("runs", "show", run_id, "--store", store).stdout
    assert "command    sh -c 'echo hi there'" in shown.splitlines()
    assert "sh -c 'echo hi there'" in cli_run("runs", "list", "--store", store).stdout


def test_the_png_and_the_web_page_colour_a_correlation_alike(tmp_path):
    """r = +1 is red and r = -1 blue in both (the web page had them the other way round)."""
    import numpy as np
    import pandas as pd
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import to_rgb

    from autoprof.analysis.correlation import Correlation, colour_scale
    from autoprof.analysis.renderers.png import figure

    events = ["a", "b"]
    matrix = pd.DataFrame([[1.0, -1.0], [-1.0, 1.0]], index=events, columns=events)
    fig = figure(Correlation(matrix, pd.DataFrame(columns=["event", "reason"]), "pearson", 20))
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    pixels = np.asarray(canvas.buffer_rgba())[:, :, :3] / 255
    ax = fig.axes[0]

    def cell(i: int, j: int) -> np.ndarray:
        x, y = ax.transData.transform((j - 0.3, i - 0.3))  # off the printed coefficient
        return pixels[int(pixels.shape[0] - y), int(x)]

    scale = dict(colour_scale())  # what the web page's heatmap is given
    assert np.allclose(cell(0, 0), to_rgb(scale[1.0]), atol=0.02)  # r = +1
    assert np.allclose(cell(0, 1), to_rgb(scale[0.0]), atol=0.02)  # r = -1
    red, _, blue = to_rgb(scale[1.0])
    assert red > 0.3 > blue


def test_served_pages_have_an_icon_and_no_token_field_once_logged_in(tmp_path):
    from tests.test_web import TOKEN, client

    with client(f"sqlite:///{tmp_path / 's.db'}", tmp_path / "data", ["true"]) as web:
        icon = web.get("/favicon.ico")
        assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"
        assert icon.text.startswith("<svg") and 'rel="icon"' in web.get("/").text
        assert 'id="token"' in web.get("/new").text  # not logged in: the field asks for it
        web.get(f"/login?token={TOKEN}")  # sets the cookie
        assert 'id="token"' not in web.get("/new").text


def test_the_package_license_is_an_spdx_string():
    """pip warned on every install that a TOML table license is deprecated (PEP 639)."""
    import tomllib

    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert project["project"]["license"] == "MIT"


# --- make demo / make test: the Debian packages ------------------------------------------------

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


def test_the_readmes_profiles_each_have_a_folder_of_their_own():
    """Issue #41: two README examples profiled different commands into `-o out`; the second,
    run after the first, was refused ("out holds a profile of another command")."""
    import re
    import shlex

    profiles: dict[str, list[str]] = {}
    text = (REPO / "README.md").read_text().replace("\\\n", " ")
    for line in text.splitlines():
        found = re.search(r"autoprof (?:profile|record|memory) (.*)", line)
        if found and " -- " in found[1]:
            words = shlex.split(found[1].split("#")[0].replace("$(", "").replace(")", ""))
            folder = words[words.index("-o") + 1] if "-o" in words else "out"
            profiles.setdefault(folder, []).append(" ".join(words[words.index("--") + 1 :]))
    assert len(profiles) >= 4
    assert {f: c for f, c in profiles.items() if len(set(c)) > 1} == {}
