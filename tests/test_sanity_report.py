"""report.json as typed records: a round trip, today's files read back, older ones upgraded,
newer ones refused with one line (from the library and through `autoprof upload`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from autoprof.errors import AutoprofError, NewerFormat
from autoprof.results import aggregate
from autoprof.results.sanity_report import (
    FORMAT,
    FailedRun,
    Report,
    RunId,
    Uncounted,
    read_report,
    uncounted_kind,
)
from autoprof.run import outdir

ED64973 = Path(__file__).parent / "data" / "profile-ed64973"


@pytest.fixture
def old_profile(tmp_path) -> Path:
    """A copy of the profile folder main wrote at ed64973 (report.json of format 1)."""
    return Path(shutil.copytree(ED64973, tmp_path / "out"))


def test_report_of_format_1_reads_as_written(old_profile):
    report = read_report(old_profile / outdir.REPORT)
    assert report.format == FORMAT == 2
    assert (report.profile_id, report.rows, report.events_measured) == (
        "20fd6379-f357-4f68-924b-62c344d2be61",
        10,
        5,
    )
    runs = report.runs
    assert (runs.expected, runs.finished, runs.ok) == (2, 1, 1)
    assert runs.missing == [RunId(2, 1)] and runs.failed == [] and runs.retried == []
    idle = report.events.idle_intervals
    assert [e.event for e in idle] == [
        "mem:0x10000:w",
        "mem:0x10008:w",
        "mem:0x10010:w",
        "mem:0x10018:w",
        "task-clock",
    ]
    assert idle[-1] == Uncounted("task-clock", "software", 4, 6, ["run0001-rep1"])
    assert report.usable and report.flags() == {"idle_intervals": 5, "runs missing": 1}


def test_aggregated_report_round_trips_and_matches_the_old_one(old_profile):
    old = read_report(old_profile / outdir.REPORT)
    new = aggregate.aggregate_to(old_profile).report
    assert Report.from_json(new.to_json()) == new
    assert read_report(old_profile / outdir.REPORT) == new  # what aggregate_to wrote
    assert json.loads((old_profile / outdir.REPORT).read_text())["format"] == FORMAT
    assert (new.rows, new.events_measured, new.runs, new.events) == (
        old.rows,
        old.events_measured,
        old.runs,
        old.events,
    )


def test_format_1_without_ok_is_upgraded_and_unknown_keys_ignored():
    data = {
        "rows": 3,
        "runs": {"expected": 3, "finished": 3, "failed": [{"run": 2, "status": "timeout"}]},
        "events": {"multiplexed": [{"event": "x", "pmu": "cpu", "later": 1}]},
        "added_by_a_later_version": True,
    }
    report = Report.from_json(data)
    assert report.runs.ok == 2  # finished runs that did not fail
    assert report.runs.failed == [FailedRun(run=2, repeat=1, status="timeout")]
    assert report.events.multiplexed[0].event == "x" and report.events.not_counted == []
    assert report.broken_files == [] and "added_by_a_later_version" not in report.to_json()
    assert data["runs"].get("ok") is None  # the upgrade is pure: the input is left alone


def test_metrics_added_to_a_report_are_kept():
    report = Report.from_json({"metrics": {"IPC": 1.25}})
    assert report.to_json()["metrics"] == {"IPC": 1.25}
    assert "metrics" not in Report().to_json()


def test_newer_format_is_refused_with_one_line(tmp_path):
    path = tmp_path / outdir.REPORT
    path.write_text(json.dumps({"format": FORMAT + 1, "rows": 1}))
    with pytest.raises(NewerFormat) as caught:
        read_report(path)
    assert str(caught.value) == (
        f"{path}: written by a newer autoprof (format {FORMAT + 1}, this one reads up to "
        f"{FORMAT}); upgrade autoprof"
    )


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '{"format": "two"}'])
def test_unreadable_report_is_one_error(tmp_path, text):
    path = tmp_path / outdir.REPORT
    path.write_text(text)
    with pytest.raises(AutoprofError, match=f"^{path}: "):
        read_report(path)


def test_uncounted_kind_is_one_rule():
    assert [uncounted_kind(n, 4) for n in (0, 1, 3, 4)] == [
        None,
        "idle_intervals",
        "idle_intervals",
        "not_counted",
    ]
