"""perf stat -x parser: real perf 6.1 output recorded on this machine (tests/data/perf61, see its
README) and the two lines quoted in issue 3."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from autoprof.perf import stat_csv
from autoprof.util.status import CountState

DATA = Path(__file__).parent / "data" / "perf61"


def parse_file(name: str, **kw) -> stat_csv.StatCsv:
    return stat_csv.parse((DATA / name).read_bytes(), **kw)


def test_totals_breakpoints_software_tracepoint_msr():
    result = parse_file("totals.csv")
    frame = result.frame.set_index("EVENT")
    assert not result.interval and result.problems == []
    # bpwrite.c 1000: a[0] every iteration, a[8] every 2nd, a[16] every 4th
    assert frame.loc["mem:0x406000:w", "VALUE"] == 1000
    assert frame.loc["mem:0x406040:w", "VALUE"] == 500
    assert frame.loc["mem:0x406080:w", "VALUE"] == 250
    assert frame.loc["task-clock", "UNIT"] == "msec"
    assert frame.loc["task-clock", "VALUE"] == pytest.approx(22.31)
    assert frame.loc["msr/tsc/", "VALUE"] == 57948826
    assert frame.loc["sched:sched_switch", "STATE"] == CountState.COUNTED
    assert frame.loc["instructions", "STATE"] == CountState.NOT_SUPPORTED
    assert np.isnan(frame.loc["instructions", "VALUE"])
    assert frame.loc["page-faults", "METRIC_UNIT"] == "K/sec"
    assert frame["TIME"].isna().all()
    assert list(frame["LINE"]) == list(range(3, 11))


def test_interval_idle_intervals_are_not_counted():
    result = parse_file("interval_idle.csv")
    frame = result.frame
    assert result.interval
    bp = frame[frame["EVENT"] == "mem:0x406000:w"]
    assert list(bp["STATE"]) == ["counted", "not counted", "not counted", "counted"]
    assert bp["VALUE"].sum() == 300  # bpwrite 100, then bpwrite 200
    assert list(bp["TIME"]) == [0.100189783, 0.200550554, 0.300795910, 0.359476994]
    clock = frame[frame["EVENT"] == "task-clock"]
    assert clock["UNIT"].eq("msec").all()  # perf prints the unit even when not counted


def test_interval_per_cpu():
    frame = parse_file("interval_percpu.csv").frame
    assert len(frame) == 30  # 3 intervals x 5 events x 2 CPUs
    assert sorted(frame["CPU"].unique()) == [0, 1]
    assert frame["AGGR"].isin(["CPU0", "CPU1"]).all()
    ctx = frame[(frame["EVENT"] == "context-switches") & (frame["CPU"] == 0)]
    assert list(ctx["VALUE"]) == [49, 39, 36]


@pytest.mark.parametrize(
    ("name", "column", "aggr"),
    [
        ("per_socket.csv", "SOCKET", "S0"),
        ("per_die.csv", "DIE", "S0-D0"),
        ("per_node.csv", "NODE", "N0"),
    ],
)
def test_aggregation_prefixes(name, column, aggr):
    frame = parse_file(name).frame
    assert frame["AGGR"].eq(aggr).all()
    assert frame[column].eq(0).all()
    tsc = frame[frame["EVENT"] == "msr/tsc/"]
    assert tsc["AGGR_CPUS"].iloc[0] == 2
    assert tsc["VALUE"].iloc[0] > 1e8


def test_interval_per_core():
    frame = parse_file("interval_per_core.csv").frame
    assert sorted(frame["CORE"].unique()) == [0, 1]
    assert frame["SOCKET"].eq(0).all() and frame["DIE"].eq(0).all()
    assert frame["TIME"].nunique() == 2


def test_repeat_noise_column():
    frame = parse_file("repeat_noise.csv").frame.set_index("EVENT")
    assert frame.loc["task-clock", "NOISE_PERCENT"] == pytest.approx(2.24)
    assert frame.loc["mem:0x406000:w", "VALUE"] == 1000
    assert frame.loc["mem:0x406000:w", "RUN_TIME"] == 11029994


def test_event_spec_with_commas_spans_fields():
    frame = parse_file("comma_in_event.csv").frame
    spec = "software/config=2,config1=0/"
    assert set(frame["EVENT"]) == {spec, "TSC.NAMED", "sched:sched_switch"}
    faults = frame[frame["EVENT"] == "software/config=2,config1=0/"]
    assert list(faults["VALUE"]) == [175, 1]
    assert faults["PERCENT_RUNNING"].eq(100).all()


def test_sigint_run_keeps_its_short_last_interval():
    frame = parse_file("sigint.csv").frame
    assert frame["TIME"].nunique() == 6
    assert frame["TIME"].max() == pytest.approx(0.540989546)


def test_truncated_file_reports_the_partial_line_and_keeps_the_rest():
    result = parse_file("truncated.csv")
    assert len(result.frame) == 14  # lines 3..16 are whole; 17 is cut in its event name
    assert [p.line for p in result.problems] == [17]
    assert "partial last line" in result.problems[0].message


def test_perf_failure_leaves_only_a_header():
    result = parse_file("enospc.csv")
    assert result.frame.empty and result.problems == []


def test_foreign_locale_semicolon():
    result = parse_file("de_semicolon_interval.csv")
    assert result.separator == ";" and result.interval
    frame = result.frame.set_index("EVENT")
    assert frame.loc["task-clock", "VALUE"] == pytest.approx(31.71)
    assert frame.loc["mem:0x406000:w", "VALUE"] == 3000
    assert frame.loc["task-clock", "TIME"] == pytest.approx(0.032513402)


def test_foreign_locale_space_semicolon_per_cpu():
    result = parse_file("de_space_semicolon_percpu.csv")
    assert result.separator == " ;"
    frame = result.frame
    clock = frame[frame["EVENT"] == "task-clock"]
    assert list(clock["VALUE"]) == [pytest.approx(52.01), pytest.approx(52.02)]
    assert list(clock["CPU"]) == [0, 1]


def test_decimal_comma_with_comma_separator_is_refused_with_the_reason():
    with pytest.raises(stat_csv.StatCsvError, match="LC_ALL=C"):
        parse_file("de_comma.csv", sep=",")


def test_issue_line_space_semicolon_decimal_comma():
    line = (
        "0.250269405 ;CPU0 ;312998921 ; ;OFFCORE_REQUESTS_OUTSTANDING.DEMAND_RFO "
        ";250166318 ;100,00 ; ;\n"
    )
    result = stat_csv.parse(line, sep=" ;", interval=True)
    row = result.frame.iloc[0]
    assert result.problems == []
    assert row["EVENT"] == "OFFCORE_REQUESTS_OUTSTANDING.DEMAND_RFO"
    assert (row["TIME"], row["CPU"], row["VALUE"]) == (0.250269405, 0, 312998921)
    assert (row["RUN_TIME"], row["PERCENT_RUNNING"]) == (250166318, 100.0)


def test_issue_line_not_counted_raw_event():
    result = stat_csv.parse("<not counted>;;cpu/event=0xc0,umask=0x0/;0;100.00;;\n", sep=";")
    row = result.frame.iloc[0]
    assert row["STATE"] == CountState.NOT_COUNTED
    assert row["EVENT"] == "cpu/event=0xc0,umask=0x0/"
    assert np.isnan(row["VALUE"]) and row["RUN_TIME"] == 0


def test_sniffed_separators():
    assert stat_csv.parse((DATA / "de_semicolon_interval.csv").read_bytes()).separator == ";"
    assert stat_csv.parse((DATA / "interval_percpu.csv").read_bytes()).separator == ","


def test_uncore_instances_in_both_forms():
    text = (
        "1.000000000,S0,1,12,,uncore_cha_3/event=0x0/,100,100.00,,\n"
        "1.000000000,S0,1,13,,UNC_CHA_CLOCKTICKS [uncore_cha_4],100,100.00,,\n"
    )
    frame = stat_csv.parse(text).frame
    assert list(frame["PMU_INSTANCE"]) == ["uncore_cha_3", "uncore_cha_4"]
    assert list(frame["EVENT_BASE"]) == ["uncore_cha/event=0x0/", "UNC_CHA_CLOCKTICKS"]


def test_garbage_lines_are_problems_not_rows():
    good = (DATA / "totals.csv").read_text()
    text = good + "this is not perf,,x,y,z,,\n"
    result = stat_csv.parse(text)
    assert len(result.frame) == 8
    assert [p.line for p in result.problems] == [11]
    with pytest.raises(stat_csv.StatCsvError):
        stat_csv.parse("hello,world,this,is,not,perf\n")


def test_argv_options():
    argv = ["perf", "stat", "-x,", "-I", "100", "--", "ls", "-x;"]
    assert stat_csv.argv_options(argv) == (",", True)
    assert stat_csv.argv_options(["perf", "stat", "-x", ";", "-e", "x"]) == (";", False)
    assert stat_csv.argv_options(["perf", "stat", "--field-separator= ;", "-I100"]) == (" ;", True)


def test_zeroed_block_after_a_crash_is_reported():
    data = (DATA / "interval_idle.csv").read_bytes() + b"\0" * 512
    result = stat_csv.parse(data)
    assert len(result.frame) == 16
    assert [str(p) for p in result.problems] == ["line 19: NUL bytes (damaged file?)"]
