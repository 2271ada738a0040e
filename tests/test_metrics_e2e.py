"""Metrics end to end on this machine: a YAML metrics file over hardware breakpoints (exact
counts) and software events, through `profile --metrics`, `aggregate` and `analyze metrics`;
the co-scheduler on SKX and SPR; autoperf's results.csv."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest

from autoprof.catalog import intel
from autoprof.metrics import catalog as metric_catalog
from autoprof.metrics.events import TOPDOWN
from autoprof.metrics.plan import groups, metric_needs, plan_metrics, smt_constants
from autoprof.results import csvfile
from autoprof.run import outdir
from autoprof.schedule.cosched import fit
from autoprof.schedule.plan import run_problems
from autoprof.testing.cli import invoke

N = 2000
MINE = ["Ratio_1_0", "Ratio_3_2", "Ratio_5_4", "Ratio_4_0", "Four_per_s0", "Six_per_s0"]
MINE += ["Faults_per_ms"]  # the metrics of `_metrics_file`


def _metrics_file(tmp_path, addresses):
    slot = {f"s{i}": f"mem:{a}:w" for i, a in enumerate(addresses[:6])}

    def events(*names):
        return "{" + ", ".join(f"{n}: '{slot[n]}'" for n in names) + "}"

    path = tmp_path / "mine.yaml"
    path.write_text(
        f"""
- {{name: Ratio_1_0, formula: s1 / s0, events: {events("s0", "s1")}}}
- {{name: Ratio_3_2, formula: s3 / s2, events: {events("s2", "s3")}}}
- {{name: Ratio_5_4, formula: s5 / s4, events: {events("s4", "s5")}}}
- {{name: Ratio_4_0, formula: s4 / s0, events: {events("s0", "s4")}}}
- {{name: Four_per_s0, formula: (s0 + s1 + s2 + s3) / s0, events: {events("s0", "s1", "s2", "s3")}}}
- {{name: Six_per_s0, formula: (s0 + s1 + s2 + s3 + s4 + s5) / s0,
    events: {events("s0", "s1", "s2", "s3", "s4", "s5")}}}
- {{name: Faults_per_ms, formula: f / t, events: {{f: page-faults, t: task-clock}}, unit: per ms}}
"""
    )
    return path


@pytest.mark.slow
def test_profile_metrics_end_to_end(writes, tmp_path):
    from autoprof.examples import slot_addresses

    mine = _metrics_file(tmp_path, slot_addresses(writes))
    # the file's metrics by name: `all` adds this machine's own that software events evaluate
    # (an Intel VM has some: one more metric, one more event)
    chosen = [a for name in MINE for a in ("--metrics", name)]
    planned = invoke("schedule", "--metrics-file", str(mine), *chosen)
    assert planned.returncode == 0, planned.stderr
    # six breakpoints on four debug registers: 2 runs; every metric that fits one run is in
    # one: Ratio_4_0 has slot 0 counted a second time, in the run of slot 4
    assert "in 2 runs (lower bound 2)" in planned.stdout
    assert "co-scheduled (all events in one run): 6 of 7" in " ".join(planned.stdout.split())
    out = tmp_path / "out"
    run = subprocess.run(  # a real profile: a real process
        [sys.executable, "-m", "autoprof", "profile", "--metrics-file", str(mine),
         *chosen, "--retries", "2", "-o", str(out), "--", str(writes), str(N)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert invoke("aggregate", str(out)).returncode == 0
    shown = invoke("analyze", "metrics", str(out), "--metrics-file", str(mine))
    assert shown.returncode == 0, shown.stderr
    table = pd.read_csv(out / "analysis" / "metrics.csv").set_index("METRIC")
    # writes N: slot i is written N * (i + 1) times, counted exactly by a breakpoint
    expected = {
        "Ratio_1_0": 2.0,
        "Ratio_3_2": 4 / 3,
        "Ratio_5_4": 6 / 5,
        "Ratio_4_0": 5.0,
        "Four_per_s0": 10.0,
    }
    for name, value in expected.items():
        assert table.loc[name, "VALUE"] == pytest.approx(value, rel=1e-12), name
        assert table.loc[name, "SCOPE"] == "same-run"
    assert table.loc["Six_per_s0", "VALUE"] == pytest.approx(21.0, rel=1e-12)
    assert table.loc["Six_per_s0", "SCOPE"] == "cross-run"
    counts = csvfile.read_csv(out / outdir.RESULTS)
    slot0 = counts[counts["EVENT_NAME"].eq(f"mem:{slot_addresses(writes)[0]}:w")]
    assert sorted(slot0.groupby("RUN")["SAMPLE_VALUE"].sum()) == [N, N]  # exact in both runs
    faults = counts[counts.EVENT_NAME == "page-faults"]["SAMPLE_VALUE"].sum()
    clock = counts[counts.EVENT_NAME == "task-clock"]["SAMPLE_VALUE"].sum()
    assert table.loc["Faults_per_ms", "VALUE"] == pytest.approx(faults / clock)
    series = pd.read_csv(out / "analysis" / "metrics_series.csv")
    assert set(series.METRIC) >= {"Ratio_1_0", "Faults_per_ms"}
    assert "Six_per_s0" in shown.stdout and "cross-run" in shown.stdout


def test_analyze_metrics_on_autoperf_results(intel_dir, samples_dir, tmp_path):
    shown = invoke(
        "analyze", "metrics", str(samples_dir / "autoperf-results.csv"), "--cpu", "SKX",
        "--events-dir", str(intel_dir), "-o", str(tmp_path),
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    table = pd.read_csv(tmp_path / "metrics.csv")
    assert len(table) == 260
    # the sample holds 17 uncore and offcore events, none of a whole metric: only the run
    # time, which needs no event, has a value
    computed = table[table["MISSING"].isna()]
    assert list(computed["METRIC"]) == ["Info_System_Time"]
    sample = csvfile.read_csv(samples_dir / "autoperf-results.csv")
    assert computed["VALUE"].iloc[0] == pytest.approx(sample["TIME"].max())
    assert table["MISSING"].dropna().str.contains("not in the results").all()
    piped = invoke(
        "analyze", "metrics", str(samples_dir / "autoperf-results.csv"), "--cpu", "SKX",
        "--events-dir", str(intel_dir), "-o", "-", cwd=tmp_path,
    )  # fmt: skip
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == (tmp_path / "metrics.csv").read_text()  # -o -: the table, alone


def test_analyze_metrics_errors_are_one_line(tmp_path):
    broken = tmp_path / "results.csv"
    broken.write_text("not,a,results,file\n1,2,3,4\n")
    shown = invoke("analyze", "metrics", str(broken), "--metrics-file", "software")
    assert shown.returncode != 0 and "Traceback" not in shown.stderr
    assert shown.stderr.startswith("autoprof: error:")
    bad_set = invoke("analyze", "metrics", str(broken), "--metrics-file", "software", "--set", "X")
    assert bad_set.returncode != 0 and "expected NAME=VALUE" in bad_set.stderr


def test_profile_metrics_dry_run_for_skx(intel_dir, tmp_path):
    """The perf command lines of a metrics profile planned for another CPU: derived events
    with their terms, perf's own TSC and energy events, CHA filters."""
    words = ["ICache_Misses", "Info_System_Power", "cpu_utilization"]
    args = [f"--metrics={w}" for w in words]
    shown = invoke(
        "profile", "--events-dir", str(intel_dir), "--cpu", "SKX", *args, "--dry-run",
        "-o", str(tmp_path / "out"), "--", "true",
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert "cmask=1,edge=1,name='\"'\"'ICACHE_16B.IFDATA_STALL:c1:e1'\"'\"'/" in text
    for spec in ("msr/tsc/", "power/energy-pkg/", "power/energy-ram/"):
        assert f" -e {spec} " in text
    assert "co-scheduled (all events in one run): 3 of 3" in " ".join(shown.stderr.split())


@pytest.mark.slow  # every metric of two large catalogs, co-scheduled
@pytest.mark.parametrize("platform", ["SKX", "SPR"])
def test_coschedule_keeps_the_bound_and_gathers_metrics(intel_dir, platform):
    metrics = list(metric_catalog.load(intel_dir, platform).metrics.values())
    catalog = intel.load(
        intel_dir, platform, intel.IntelOptions(deprecated=True, experimental=True)
    )
    plain = plan_metrics(catalog, metrics, smt=True)
    plan = plain.plan
    assert len(plan) == plan.lower_bound
    assert all(not run_problems(run, plan.pmus) for run in plan.runs)
    counted = {e.key for run in plan.runs for e in run.events}
    assert counted == {e.key for e in plain.catalog.events}
    wanted = groups(metric_needs(metrics, catalog, smt_constants(True)))
    # the plan before co-scheduling keeps far fewer metrics in one run
    from autoprof.schedule import schedule

    before = schedule(plain.catalog)

    def together(p, events):
        return any({e.key for e in events} <= {e.key for e in run.events} for run in p.runs)

    assert sum(together(plan, evs) for evs in wanted.values()) > 2 * sum(
        together(before, evs) for evs in wanted.values()
    )
    consistent = plan_metrics(catalog, metrics, smt=True, consistent=True)
    for name, events in wanted.items():
        if fit(events, plan.pmus) is not None:
            assert consistent.schedule.runs[name] is not None, name
    if platform == "SPR":  # perf reads topdown-* only with TOPDOWN.SLOTS in the run
        for run in plan.runs:
            names = {e.name for e in run.events}
            if names & set(TOPDOWN):
                assert "TOPDOWN.SLOTS" in names


@pytest.mark.needs_perf
def test_quoted_metric_names_come_back_from_perf(tmp_path):
    """perf prints a quoted name term as written: derived events keep the metric's spelling."""
    out = tmp_path / "perf.csv"
    proc = subprocess.run(
        ["perf", "stat", "-x,", "-o", str(out), "-e",
         "software/config=2,name='PF.X:c1:e1'/", "true"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert ",PF.X:c1:e1," in out.read_text()


def test_metrics_list_and_show(intel_dir):
    listed = invoke(
        "metrics", "list", "--events-dir", str(intel_dir), "--cpu", "SKX", "--group", "TmaL1"
    )
    assert listed.returncode == 0, listed.stderr
    assert "SKX: 7 metrics" in listed.stdout
    for name in ("Frontend_Bound", "Bad_Speculation", "Backend_Bound", "Retiring"):
        assert name in listed.stdout
    shown = invoke(
        "metrics", "show", "--events-dir", str(intel_dir), "--cpu", "SPR", "Frontend_Bound"
    )
    assert shown.returncode == 0, shown.stderr
    assert "f = TOPDOWN.SLOTS:perf_metrics" in shown.stdout and "threshold: a > 15" in shown.stdout
    unknown = invoke("metrics", "show", "--events-dir", str(intel_dir), "--cpu", "SKX", "Nope")
    assert unknown.returncode != 0 and "no metric or metric group 'Nope'" in unknown.stderr
