"""Named regions: the markers' protocol and accounting (pure), and end-to-end profiles whose
region counts are exact: hardware breakpoints on a slot written a known number of times in
and out of regions (C, autoprof.h), and a tracepoint of a system call made a known number of
times inside a Python region (autoprof.markers)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from autoprof.examples import build_regions, region_slot
from autoprof.markers import message
from autoprof.perf.counters import Reading
from autoprof.perf.selfcheck import perf_path
from autoprof.run.regions import Tally, parse

OUTSIDE, HOT, INNER, TIMES = 1000, 200, 30, 3


def readings(*values: int) -> list[Reading]:
    return [Reading(v, v, v) for v in values]


# -- the protocol and the accounting ------------------------------------------------------


def test_message_round_trips_and_cuts_long_names() -> None:
    assert parse(message("B", 42, "solve")) == ("B", 42, "solve")
    assert parse(message("E", 7, "ünïcode name, with commas")) == (
        "E",
        7,
        "ünïcode name, with commas",
    )
    assert parse(message("B", 1, "x" * 100)) == ("B", 1, "x" * 64)
    assert parse(b"X 1 name") is None and parse(b"B one name") is None and parse(b"B 1 ") is None
    assert parse(b"B 1 \x1b[31mred") is None and parse(b"B 1 two\nlines") is None


def test_nested_and_repeated_regions_accumulate_between_their_own_markers() -> None:
    tally = Tally(["all"])
    tally.mark(message("B", 1, "hot"), readings(10))
    tally.mark(message("B", 1, "inner"), readings(15))
    tally.mark(message("E", 1, "inner"), readings(18))
    tally.mark(message("E", 1, "hot"), readings(20))
    tally.mark(message("B", 1, "hot"), readings(100))
    tally.mark(message("E", 1, "hot"), readings(105))
    record = tally.end(readings(200))
    assert record.regions["hot"].entries == 2
    assert record.regions["hot"].readings == readings(15)  # (20 - 10) + (105 - 100)
    assert record.regions["inner"].readings == readings(3)
    assert record.problems == [] and record.markers == 6 and record.total == readings(200)


def test_a_region_two_threads_are_in_counts_while_either_is() -> None:
    tally = Tally(["work"])
    tally.mark(message("B", 1, "work"), readings(0))
    tally.mark(message("B", 2, "work"), readings(5))
    tally.mark(message("E", 1, "work"), readings(9))
    tally.mark(message("E", 2, "work"), readings(12))
    record = tally.end(readings(20))
    assert record.regions["work"].entries == 2 and record.regions["work"].readings == readings(12)
    assert record.problems == []


def test_unbalanced_markers_name_the_region_position_and_thread() -> None:
    tally = Tally(["all"])
    tally.mark(message("E", 9, "ghost"), readings(1))
    tally.mark(message("B", 9, "outer"), readings(2))
    tally.mark(message("B", 9, "inner"), readings(3))
    tally.mark(message("E", 9, "outer"), readings(4))
    tally.mark(message("B", 9, "open"), readings(6))
    record = tally.end(readings(10))
    assert record.problems == [
        "end of 'ghost' without a begin (marker 1, thread 9)",
        "end of 'outer' while 'inner', entered inside it, is still open: unbalanced nesting "
        "(marker 4, thread 9)",
        "'open' entered but never left (thread 9): counted to the end",
        "'inner' entered but never left (thread 9): counted to the end",
    ]
    assert record.regions["outer"].readings == readings(2)
    assert record.regions["open"].readings == readings(4)


def test_only_the_regions_asked_for_are_counted_and_the_others_never_entered() -> None:
    tally = Tally(["hot", "cold"])
    tally.mark(message("B", 1, "hot"), readings(1))
    tally.mark(message("B", 1, "other"), readings(2))
    tally.mark(message("E", 1, "other"), readings(3))
    tally.mark(message("E", 1, "hot"), readings(4))
    record = tally.end(readings(5))
    assert list(record.regions) == ["hot"] and record.never_entered() == ["cold"]


# -- end to end ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def regions_binary(tmp_path_factory) -> tuple[Path, str]:
    """The region example, built; skips where perf ALONE miscounts its slot's breakpoint."""
    if shutil.which("perf") is None or shutil.which("cc") is None:
        pytest.skip("needs perf and cc")
    binary = build_regions(tmp_path_factory.mktemp("bin"))
    address = region_slot(binary)
    args = [str(OUTSIDE), str(HOT), str(INNER), str(TIMES)]
    proc = subprocess.run(
        [perf_path(), "stat", "-x,", "-e", f"mem:{address}:w", "--", str(binary), *args],
        capture_output=True,
        text=True,
    )
    want = OUTSIDE + TIMES * (HOT + INNER)
    if f"{want},,mem:{address}:w" not in proc.stderr:
        pytest.skip(f"perf alone miscounts a hardware breakpoint here: {proc.stderr[-200:]}")
    return binary, address


def _results(out: Path) -> pd.DataFrame:
    return pd.read_csv(out / "results.csv", keep_default_na=False, na_values={"SAMPLE_VALUE": [""]})


@pytest.fixture(scope="module")
def profiled(tmp_path_factory, regions_binary) -> tuple[Path, str]:
    """The region example profiled with --region all, twice, and aggregated: (out, the slot's
    breakpoint event)."""
    from autoprof.testing.cli import invoke

    binary, address = regions_binary
    event = f"mem:{address}:w"
    out = tmp_path_factory.mktemp("regions") / "out"
    args = [str(OUTSIDE), str(HOT), str(INNER), str(TIMES)]
    common = ["-e", event, "-e", "task-clock", "-e", "page-faults"]
    done = invoke(
        "profile", *common, "--region", "all", "--repeat", "2", "-o", out, "--", binary, *args
    )
    assert done.returncode == 0, done.output
    assert invoke("aggregate", out).returncode == 0
    return out, event


@pytest.mark.slow
def test_breakpoint_counts_per_region_are_exact_in_the_plans_runs(profiled) -> None:
    out, event = profiled
    rows = _results(out)
    slot = rows[rows["EVENT_NAME"] == event]
    by_region = slot.groupby("REGION")["SAMPLE_VALUE"].apply(list).to_dict()
    # the whole program's rows are its intervals (more than one when a loaded machine made the
    # run outlast -I's 100 ms): their sum, each repeat; a region's row is its run's total
    whole = slot[slot["REGION"] == ""].groupby("REPEAT")["SAMPLE_VALUE"].sum().tolist()
    assert whole == [OUTSIDE + TIMES * (HOT + INNER)] * 2
    assert by_region["hot"] == [TIMES * (HOT + INNER)] * 2
    assert by_region["inner"] == [TIMES * INNER] * 2
    assert set(rows.loc[rows["REGION"] != "", "STATUS"]) == {"ok"}
    # the regions cost no run: one group, twice, as without --region
    assert sorted(p.name for p in (out / "runs").iterdir()) == ["run0001-rep1", "run0001-rep2"]
    report = json.loads((out / "report.json").read_text())
    assert {r["name"]: r["entries"] for r in report["regions"]} == {"hot": 6, "inner": 6}
    assert report["region_problems"] == []
    # a region's task-clock lies within the whole program's
    clock = rows[rows["EVENT_NAME"] == "task-clock"].groupby("REGION")["SAMPLE_VALUE"].sum()
    assert 0 < clock["inner"] <= clock["hot"] <= clock[""]


@pytest.mark.slow
def test_analyses_show_regions_side_by_side_or_one_alone(cli_run, tmp_path, profiled) -> None:
    out, event = profiled
    assert cli_run("analyze", "stats", out, "-o", tmp_path / "a").returncode == 0
    sides = pd.read_csv(tmp_path / "a" / "stats_regions.csv", index_col="event")
    assert sides.loc[event].to_dict() == {
        "(whole program)": OUTSIDE + TIMES * (HOT + INNER),
        "hot": TIMES * (HOT + INNER),
        "inner": TIMES * INNER,
    }
    assert (
        cli_run("analyze", "stats", out, "--region", "inner", "-o", tmp_path / "i").returncode == 0
    )
    inner = pd.read_csv(tmp_path / "i" / "stats.csv", index_col="event")
    assert inner.loc[event, "total"] == TIMES * INNER and inner.loc[event, "samples"] == 2
    whole = pd.read_csv(tmp_path / "a" / "stats.csv", index_col="event")
    assert whole.loc[event, "total"] == OUTSIDE + TIMES * (HOT + INNER)  # no region row in it
    missing = cli_run("analyze", "stats", out, "--region", "nope")
    assert missing.returncode == 2 and "regions: hot, inner" in missing.stderr
    metrics = ("analyze", "metrics", out, "--metrics-file", "software")
    assert cli_run(*metrics, "--region", "hot", "-o", tmp_path / "m").returncode == 0
    value = pd.read_csv(tmp_path / "m" / "metrics.csv", index_col="METRIC").loc[
        "PageFaults_per_ms", "VALUE"
    ]
    rows = _results(out)
    hot = rows[rows["REGION"] == "hot"].groupby("EVENT_NAME")["SAMPLE_VALUE"].sum()
    assert value == pytest.approx(hot["page-faults"] / hot["task-clock"])  # the region's own
    compared = cli_run("analyze", "compare", out, out, "--region", "hot", "-o", tmp_path / "c.csv")
    assert compared.returncode == 0, compared.output
    table = pd.read_csv(tmp_path / "c.csv", index_col="event")
    assert table.loc[event, "total_a"] == TIMES * (HOT + INNER) and table.loc[event, "ratio"] == 1


@pytest.mark.slow
def test_stored_regions_export_byte_for_byte_and_show_side_by_side(
    cli_run, tmp_path, profiled
) -> None:
    from starlette.testclient import TestClient

    from autoprof.store import engine
    from autoprof.web.app import create_app
    from autoprof.web.state import Settings

    out, event = profiled
    url = f"sqlite:///{tmp_path / 'store.db'}"
    assert cli_run("upload", out, "--store", url).returncode == 0
    run_id = json.loads((out / "manifest.json").read_text())["id"]
    exported = tmp_path / "export.csv"
    assert cli_run("runs", "export", run_id, "-o", exported, "--store", url).returncode == 0
    assert exported.read_bytes() == (out / "results.csv").read_bytes()
    shown = cli_run("runs", "show", run_id, "--store", url)
    assert "regions  hot (6 entries), inner (6 entries); never entered: none" in shown.stdout
    assert "regions side by side" in shown.stdout
    settings = Settings(engine.open_store(url), tmp_path / "data", "t" * 24, [])
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as web:
        analysis = web.get(f"/api/runs/{run_id}/analysis").json()
        page = web.get(f"/runs/{run_id}").text
    regions = {row["event"]: row for row in analysis["regions"]["rows"]}
    assert analysis["regions"]["columns"] == ["event", "(whole program)", "hot", "inner"]
    assert (
        regions[event]["hot"] == TIMES * (HOT + INNER) and regions[event]["inner"] == TIMES * INNER
    )
    stats = {row["event"]: row for row in analysis["stats"]}
    assert stats[event]["total"] == OUTSIDE + TIMES * (HOT + INNER)  # the whole program's alone
    assert 'id="regions"' in page


@pytest.mark.slow
def test_a_region_never_entered_is_reported_not_zero(cli_run, tmp_path, regions_binary) -> None:
    binary, address = regions_binary
    out = tmp_path / "out"
    done = cli_run(
        "profile", "-e", f"mem:{address}:w", "--region", "hot", "--region", "cold",
        "-o", out, "--", binary, "10", "5", "1", "1",
    )  # fmt: skip
    assert done.returncode == 0, done.output
    assert cli_run("aggregate", out).returncode == 0
    rows = _results(out)
    assert set(rows["REGION"]) == {"", "hot"}
    report = json.loads((out / "report.json").read_text())
    assert {r["name"]: r["never_entered"] for r in report["regions"]} == {
        "hot": False,
        "cold": True,
    }


@pytest.mark.slow
def test_a_program_without_markers_stops_after_its_first_run(cli_run, tmp_path) -> None:
    out = tmp_path / "out"
    done = cli_run(
        "profile", "-e", "task-clock", "--region", "hot", "--repeat", "3", "-o", out, "--", "true"
    )
    assert done.returncode == 2
    (error,) = [line for line in done.stderr.splitlines() if line.startswith("autoprof: error:")]
    assert "passed no region marker in run 1" in error
    assert [p.name for p in (out / "runs").iterdir()] == ["run0001-rep1"]  # kept, not 3 runs


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="tracepoints need root")
def test_python_region_counts_its_system_calls_exactly(cli_run, tmp_path) -> None:
    script = tmp_path / "prog.py"
    script.write_text(
        textwrap.dedent(
            """
            import os
            from autoprof.markers import region

            @region("decorated")
            def twice():
                os.getpid(); os.getpid()

            for _ in range(7):
                os.getpid()
            with region("py"):
                for _ in range(5):
                    os.getpid()
                twice()
            """
        )
    )
    out = tmp_path / "out"
    event = "syscalls:sys_enter_getpid"
    done = cli_run(
        "profile", "-e", event, "--region", "all", "-o", out, "--", sys.executable, script
    )
    assert done.returncode == 0, done.output
    assert cli_run("aggregate", out).returncode == 0
    rows = _results(out)
    got = rows[rows["EVENT_NAME"] == event].groupby("REGION")["SAMPLE_VALUE"].sum().to_dict()
    assert got["py"] == 7 and got["decorated"] == 2
    assert got[""] >= 14  # the interpreter's start-up may call getpid too


@pytest.mark.slow
def test_unbalanced_markers_flag_the_run(cli_run, tmp_path) -> None:
    script = tmp_path / "prog.py"
    script.write_text("from autoprof.markers import begin, end\nbegin('a')\nend('b')\nend('a')\n")
    out = tmp_path / "out"
    done = cli_run(
        "profile", "-e", "task-clock", "--region", "all", "-o", out, "--", sys.executable, script
    )
    assert done.returncode == 0, done.output
    result = cli_run("aggregate", out)
    assert "region problems" in result.stdout
    report = json.loads((out / "report.json").read_text())
    (problem,) = report["region_problems"]
    assert problem["run"] == 1 and problem["problem"].startswith(
        "end of 'b' without a begin (marker 2,"
    )


def test_markers_outside_autoprof_make_no_system_call(tmp_path) -> None:
    """Not under autoprof, a marker is a load and a branch: the same program with and without
    its markers compiled in makes the same system calls (counted by perf's raw_syscalls)."""
    if shutil.which("perf") is None or shutil.which("cc") is None or os.geteuid() != 0:
        pytest.skip("needs perf, cc and root (tracepoints)")
    binary = build_regions(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "AUTOPROF_MARKERS"}
    counts = []
    for times in ("0", "1000"):
        proc = subprocess.run(
            [perf_path(), "stat", "-x,", "-e", "raw_syscalls:sys_enter", "--",
             str(binary), "10", "10", "1", times],
            capture_output=True, text=True, env=env,
        )  # fmt: skip
        counts.append(int(proc.stderr.strip().splitlines()[-1].split(",")[0]))
    assert counts[0] == counts[1], counts  # 1000 passes through 4 markers: no call more


def test_the_web_form_takes_regions_threads_and_cores_with_the_clis_checks() -> None:
    from autoprof.errors import AutoprofError
    from autoprof.web.form import JobRequest

    form = {"tool": "profile", "command": "./prog", "events": ["task-clock"]}
    request = JobRequest.from_form({**form, "regions": "hot\ninner, with a comma\n", "pin": "0"})
    options = request.measurement().options
    assert options.regions == ("hot", "inner, with a comma") and options.pin == "0"
    assert JobRequest(**json.loads(json.dumps(request.__dict__))).options == options
    with pytest.raises(AutoprofError, match="not with --per-thread"):
        JobRequest.from_form({**form, "regions": "hot", "per_thread": True})
    with pytest.raises(AutoprofError, match="a region's name is 1 to 64 bytes"):
        JobRequest.from_form({**form, "regions": "x" * 65})


def test_a_variable_naming_another_descriptor_is_not_the_channel(tmp_path) -> None:
    """AUTOPROF_MARKERS inherited by a program whose descriptor of that number is a file (here
    its standard output): the markers check it is autoprof's socket and stay off."""
    if shutil.which("cc") is None:
        pytest.skip("needs cc")
    binary = build_regions(tmp_path)
    env = {**os.environ, "AUTOPROF_MARKERS": "1"}
    c = subprocess.run([str(binary), "10", "10", "1", "3"], env=env, capture_output=True)
    script = "from autoprof.markers import region\nwith region('x'):\n    pass\n"
    py = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True)
    assert (c.returncode, c.stdout, py.returncode, py.stdout) == (0, b"", 0, b"")


@pytest.mark.slow
def test_a_regions_correlation_takes_its_repeats_as_samples(cli_run, tmp_path, profiled) -> None:
    """`analyze correlation --region hot` correlates the region's own totals, one per repeat:
    the breakpoint's count is exact, the same in both repeats, so it is left out as constant;
    task-clock varies, and page faults may (where the program's pages fall changes from run to
    run: CI saw them differ). With task-clock alone there is nothing to correlate, said in one
    line; with both, the two repeats are the two samples. An unknown region is one line naming
    those there are."""
    out, event = profiled
    done = cli_run("analyze", "correlation", out, "--region", "hot", "--min-overlap", "2")
    if done.returncode == 2:
        assert len(done.stderr.splitlines()) == 1, done.output
        assert "1 left (task-clock)" in done.stderr and "fewer than 2 intervals" in done.stderr
    else:
        assert done.returncode == 0, done.output
        assert "2 events over 2 intervals" in done.stdout, done.output
        assert f"{event} (constant)" in done.stdout, done.output
    missing = cli_run("analyze", "correlation", out, "--region", "nope")
    assert missing.returncode == 2 and "regions: hot, inner" in missing.stderr


def test_schedule_region_says_the_regions_cost_no_run(cli_run) -> None:
    done = cli_run("schedule", "--cpu", "SKX", "--region", "hot", "--region", "inner")
    assert done.returncode == 0, done.output
    runs = re.search(r"in (\d+) runs", done.output)
    assert runs is not None, done.output
    assert (
        f"regions (hot, inner): every event above is counted per region in the same {runs[1]} runs"
        in done.output
    )


def test_markers_cflags_is_one_include_flag_for_the_header(cli_run) -> None:
    done = cli_run("markers", "--cflags")
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 1, done.output
    flag = done.stdout.strip()
    assert flag.startswith("-I") and (Path(flag[2:]) / "autoprof.h").is_file(), flag
