"""profile --per-thread (a perf per thread of the command), --pin and --core-type (where the
command runs), and perf's --per-thread output recorded here (tests/data/perf61/per_thread_*)."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from autoprof.examples import build_threads, slot_addresses
from autoprof.perf import stat_arrow, stat_csv
from autoprof.run import outdir, pinning, planning
from autoprof.run.options import ProfileOptions
from autoprof.run.request import Request
from autoprof.testing import kernel_formats
from autoprof.util.records import read_json

PERF61 = Path(__file__).parent / "data" / "perf61"
N = 3000  # main writes its slot N times, the worker its own 2N times


@pytest.fixture(scope="module")
def threads(tmp_path_factory, writes) -> Path:
    """threads.c built (where `writes` shows that perf counts breakpoints exactly here)."""
    return build_threads(tmp_path_factory.mktemp("threads"))


def _results(out: Path) -> pd.DataFrame:
    return pd.read_csv(out / outdir.RESULTS, keep_default_na=False)


def test_perf_per_thread_output_names_each_thread_comm_tid():
    parsed = stat_csv.parse((PERF61 / "per_thread_interval.csv").read_bytes())
    assert not parsed.problems and parsed.interval
    assert sorted(set(parsed.frame["AGGR"])) == ["threads-28826", "worker-28828"]
    assert len(parsed.frame) == 12  # 2 intervals x 3 events x 2 threads
    totals = stat_csv.parse((PERF61 / "per_thread_totals.csv").read_bytes()).frame
    assert list(totals["AGGR"]) == ["worker-28828"] * 2
    assert list(totals["EVENT"]) == ["task-clock", "page-faults"]
    counts, problems = stat_arrow.read((PERF61 / "per_thread_totals.csv").read_bytes(), ",", False)
    assert not problems and counts.value[0] == pytest.approx(55.85)


@pytest.mark.needs_perf
def test_per_thread_counts_each_thread_exactly(cli_run, threads, tmp_path):
    main_slot, worker_slot = slot_addresses(threads)
    events = ["-e", f"mem:{main_slot}:w", "-e", f"mem:{worker_slot}:w", "-e", "task-clock"]
    out = tmp_path / "out"
    result = cli_run("profile", "-o", str(out), "--per-thread", *events, "--", str(threads), str(N))
    assert result.returncode == 0, result.stderr
    assert cli_run("aggregate", str(out)).returncode == 0
    record = outdir.read_run_record(outdir.run_dir(out, 1, 1))
    first, worker = record.threads
    assert (first.parent, worker.parent) == (None, first.tid)
    assert (first.comm, worker.comm) == ("threads", "worker")  # its name when it ended
    assert (first.perf_exit, worker.perf_exit) == (0, 0)
    assert (outdir.run_dir(out, 1, 1) / f"perf-{worker.tid}.csv").is_file()
    frame = _results(out)
    totals = frame.groupby(["UNIT", "EVENT_NAME"])["SAMPLE_VALUE"].sum()
    main, other = f"threads-{first.tid}", f"worker-{worker.tid}"
    assert set(frame["UNIT"]) == {main, other}
    assert totals[main, f"mem:{main_slot}:w"] == N and totals[main, f"mem:{worker_slot}:w"] == 0
    assert (
        totals[other, f"mem:{main_slot}:w"] == 0 and totals[other, f"mem:{worker_slot}:w"] == 2 * N
    )
    assert totals[main, "task-clock"] > 0 and totals[other, "task-clock"] > 0
    assert set(frame["STATUS"]) == {"ok"}  # one perf per thread: nothing multiplexed
    report = read_json(out / outdir.REPORT)
    assert report["runs"]["ok"] == 1
    # the threads side by side: analyze stats, the store's runs show and the run page
    assert cli_run("analyze", "stats", str(out), "-o", str(tmp_path / "a")).returncode == 0
    sides = pd.read_csv(tmp_path / "a" / "stats_threads.csv", index_col="event")
    assert sides.loc[f"mem:{worker_slot}:w"].to_dict() == {main: 0, other: 2 * N}
    url = f"sqlite:///{tmp_path / 'store.db'}"
    assert cli_run("upload", str(out), "--store", url).returncode == 0
    run_id = read_json(out / outdir.MANIFEST)["id"]
    shown = cli_run("runs", "show", run_id, "--store", url).stdout
    assert "threads side by side" in shown and other in shown
    from starlette.testclient import TestClient

    from autoprof.store import engine
    from autoprof.web.app import create_app
    from autoprof.web.state import Settings

    settings = Settings(engine.open_store(url), tmp_path / "data", "t" * 24, [])
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as web:
        page = web.get(f"/api/runs/{run_id}/analysis").json()
    assert page["threads"]["columns"] == ["event", main, other]


@pytest.mark.needs_perf
def test_without_per_thread_the_process_is_one_count(cli_run, threads, tmp_path):
    main_slot, worker_slot = slot_addresses(threads)
    out = tmp_path / "out"
    events = ["-e", f"mem:{main_slot}:w", "-e", f"mem:{worker_slot}:w"]
    assert cli_run("profile", "-o", str(out), *events, "--", str(threads), str(N)).returncode == 0
    assert cli_run("aggregate", str(out)).returncode == 0
    totals = _results(out).groupby(["UNIT", "EVENT_NAME"])["SAMPLE_VALUE"].sum()
    assert totals["breakpoint", f"mem:{main_slot}:w"] == N
    assert totals["breakpoint", f"mem:{worker_slot}:w"] == 2 * N
    assert outdir.read_run_record(outdir.run_dir(out, 1, 1)).threads == []


@pytest.mark.needs_perf
@pytest.mark.parametrize("per_thread", [False, True])
def test_pin_binds_the_command_and_its_children(cli_run, tmp_path, per_thread):
    cpu = max(os.sched_getaffinity(0))  # the last CPU this test may use
    out = tmp_path / "out"
    show = "grep Cpus_allowed_list /proc/self/status; grep Cpus_allowed_list /proc/$$/status"
    flags = ["--per-thread"] if per_thread else []
    argv = ["profile", "-o", str(out), "--pin", str(cpu), *flags, "-e", "task-clock"]
    result = cli_run(*argv, "--", "sh", "-c", show)
    assert result.returncode == 0, result.stderr
    folder = outdir.run_dir(out, 1, 1)
    said = (folder / outdir.STDOUT).read_text().splitlines()
    assert said == [f"Cpus_allowed_list:\t{cpu}"] * 2  # grep (a child) and sh itself
    assert outdir.read_run_record(folder).cpus == [cpu]
    assert read_json(out / outdir.MANIFEST)["options"]["pin"] == str(cpu)
    if per_thread:  # sh, and each grep it forked, counted by a perf of its own
        comms = [t.comm for t in outdir.read_run_record(folder).threads]
        assert comms == ["sh", "grep", "grep"]


def test_pin_refuses_cpus_the_machine_lacks(cli_run):
    result = cli_run("profile", "--pin", "4095", "-e", "task-clock", "--", "true")
    assert result.returncode == 2
    assert result.stderr == "autoprof: error: --pin 4095: this machine has no CPU 4095 online\n"


def _hybrid_sysfs(root: Path) -> Path:
    """A fake Alder Lake event_source tree: cpu_core serves CPU 0, cpu_atom CPU 1."""
    kernel_formats.write_tree(root, kernel_formats.INTEL["ADL"])
    return root


def test_core_type_pins_to_the_cpus_of_that_core_pmu(tmp_path):
    sysfs = _hybrid_sysfs(tmp_path)
    assert pinning.workload_cpus(ProfileOptions(core_type="efficiency"), sysfs) == {1}
    assert pinning.workload_cpus(ProfileOptions(core_type="performance"), sysfs) == {0}
    with pytest.raises(Exception, match=r"^--pin 1: CPUs 1 are no performance cores$"):
        pinning.workload_cpus(ProfileOptions(core_type="performance", pin="1"), sysfs)
    with pytest.raises(Exception, match=r"no cpu_atom PMU \(not a hybrid CPU\)$"):
        pinning.workload_cpus(ProfileOptions(core_type="efficiency"), tmp_path / "none")


@pytest.mark.parametrize(
    ("kind", "pmu", "other"),
    [("efficiency", "cpu_atom", "cpu_core"), ("performance", "cpu_core", "cpu_atom")],
)
def test_core_type_plans_only_that_core_pmus_events(intel_dir, kind, pmu, other):
    def planned(options: ProfileOptions):
        request = Request(
            [], [], options=options, cpu="GenuineIntel-6-97", events_dir=str(intel_dir)
        )
        return planning.plan(request)

    both = planned(ProfileOptions())
    one = planned(ProfileOptions(core_type=kind))
    pmus = {e.pmu for run in one.plan.runs for e in run.events}
    assert pmus == {pmu, "software"}
    mine = {e.name for e in both.catalog.events if e.pmu == pmu}
    assert {e.name for e in one.catalog.events if e.pmu == pmu} == mine
    why = f"{other} counts on the other cores (--core-type {kind} runs the command on {pmu}'s)"
    left = {x.name for x in one.catalog.excluded if x.reason == why}
    assert left == {e.name for e in both.catalog.events if e.pmu == other} != set()


def test_schedule_shows_the_core_type_plan(cli_run, intel_dir):
    argv = ["schedule", "--cpu", "GenuineIntel-6-97", "--events-dir", str(intel_dir), "--json"]
    plan = __import__("json").loads(cli_run(*argv, "--core-type", "efficiency").stdout)
    assert {e["pmu"] for run in plan["runs"] for e in run["events"]} == {"cpu_atom", "software"}
    refused = cli_run("schedule", "--cpu", "SKX", "--core-type", "efficiency")
    assert refused.returncode == 2 and "has no cpu_atom PMU (not hybrid)" in refused.stderr


@pytest.mark.slow
def test_bench_pins_its_commands_as_profile_does(tmp_path):
    """bench takes profile's --pin (declared once): every repetition of the command ran there."""
    from autoprof.testing.cli import process

    cpu = max(os.sched_getaffinity(0))
    said = tmp_path / "said"
    show = f"grep Cpus_allowed_list /proc/self/status >> {said}"
    done = process("bench", "-n", "2", "--warmup", "1", "--pin", str(cpu), "--", "sh", "-c", show)
    assert done.returncode == 0, done.stderr
    assert said.read_text().splitlines() == [f"Cpus_allowed_list:\t{cpu}"] * 3
    refused = process("bench", "-n", "2", "--pin", "4095", "--", "true")
    assert refused.returncode == 2
    assert refused.stderr.endswith("--pin 4095: this machine has no CPU 4095 online\n")
