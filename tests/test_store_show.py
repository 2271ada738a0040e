"""`runs show`'s text (`store.show.RunRenderer`), drawn from a stored run's details as
`queries.run_details` gives them: no store, no CLI."""

from __future__ import annotations

from datetime import datetime

import pandas as pd

from autoprof.results.sanity_report import (
    EventIssues,
    FailedRun,
    Multiplexed,
    RegionProblem,
    RegionSummary,
    Report,
    RunsSummary,
)
from autoprof.store.show import RunRenderer, ShownRun

AT = datetime(2024, 5, 1, 12, 30, 0)


def part(number: int, report: Report | None, options: dict | None = None) -> dict:
    return {
        "part": number,
        "part_id": number,
        "rows": 120,
        "uploaded": AT,
        "machine": {
            "hostname": "node7",
            "cpu_id": "GenuineIntel-6-55-4",
            "model_name": "Xeon",
            "kernel": "6.1.0",
            "perf_version": "6.1",
            "smt": True,
            "nmi_watchdog": False,
            "perf_event_paranoid": 2,
            "counters": {},
        },
        "options": options or {},
        "report": None if report is None else report.to_json(),
        "records": 6,
    }


def details(parts: list[dict], **more) -> dict:
    return {
        "id": "1f0e",
        "command": ["./prog", "a b"],
        "created": AT,
        "started": AT,
        "ended": AT,
        "autoprof_version": "0.9",
        "status": "complete",
        "rows": 240,
        "parts_expected": 2,
        "tags": {"kernel": "6.1", "ci": "yes"},
        "parts": parts,
        "functions": {},
    } | more


REPORT = Report(
    events_measured=9,
    runs=RunsSummary(expected=6, finished=5, failed=[FailedRun(run=2, repeat=1)]),
    events=EventIssues(multiplexed=[Multiplexed(event="cycles")]),
)


def test_a_run_its_parts_and_their_reports():
    text = RunRenderer().render(ShownRun(details([part(1, REPORT), part(2, None)])))
    assert text == (
        "run        1f0e\n"
        "command    ./prog 'a b'\n"
        "created    2024-05-01 12:30:00 UTC\n"
        "ran        2024-05-01 12:30:00 .. 2024-05-01 12:30:00 UTC\n"
        "status     complete (2 of 2 parts)\n"
        "rows       240\n"
        "autoprof   0.9\n"
        "tags       kernel=6.1 ci=yes\n"
        "part 1: 120 rows, uploaded 2024-05-01 12:30:00 UTC\n"
        "  machine  node7: GenuineIntel-6-55-4 (Xeon)\n"
        "           kernel 6.1.0, perf 6.1, SMT on, NMI watchdog off\n"
        "  report   9 events measured; runs 5/6 finished, 1 failed, 0 broken, 0 missing; "
        "1 multiplexed, 0 not counted, 0 not supported, 0 broken files\n"
        "part 2: 120 rows, uploaded 2024-05-01 12:30:00 UTC\n"
        "  machine  node7: GenuineIntel-6-55-4 (Xeon)\n"
        "           kernel 6.1.0, perf 6.1, SMT on, NMI watchdog off\n"
        "  report   none (aggregate wrote no report.json)\n"
    )


def test_no_tags_no_tag_line_and_an_unknown_expected_count():
    report = Report(runs=RunsSummary(expected=None, finished=3))
    text = RunRenderer().render(ShownRun(details([part(1, report)], tags={})))
    assert "tags" not in text
    assert "runs 3/? finished" in text


def test_regions_side_by_side_and_their_summary():
    report = Report(
        events_measured=1,
        regions=[RegionSummary("hot", entries=4), RegionSummary("cold", never_entered=True)],
        region_problems=[RegionProblem(run=1, repeat=1, problem="unbalanced")],
    )
    totals = pd.DataFrame(
        {
            "EVENT_NAME": ["instructions"] * 4,
            "PMU": ["cpu"] * 4,
            "REGION": pd.Categorical([None, "hot", None, "hot"], categories=["hot"]),
            "UNIT": ["cpu"] * 4,
            "RUN": [1, 1, 1, 1],
            "REPEAT": [1, 1, 2, 2],
            "SAMPLE_VALUE": [100.0, 40.0, 300.0, 60.0],
        }
    )
    shown = ShownRun(details([part(1, report)]), totals)
    assert shown.regions and not shown.threads
    text = RunRenderer().render(shown)
    assert text.endswith(
        "  regions  hot (4 entries), cold (0 entries); never entered: cold; 1 problems\n"
        "regions side by side (total per execution):\n"
        "              (whole program)   hot\n"
        "event                              \n"
        "instructions            200.0  50.0\n"
    )


def test_without_totals_no_side_by_side():
    """The JSON asks for no totals: the text has no side-by-side section then."""
    report = Report(regions=[RegionSummary("hot", entries=1)])
    shown = ShownRun(details([part(1, report, {"per_thread": True})]))
    assert shown.regions and shown.threads
    assert "side by side" not in RunRenderer().render(shown)


def test_the_top_functions_of_a_recording():
    functions = {
        "rec": {
            "events": ["cpu-clock"],
            "totals": {"cpu-clock": 1234567},
            "functions": [
                {"symbol": f"f{i}", "dso": "prog", "cpu-clock": {"percent": 50.0 / (i + 1)}}
                for i in range(7)
            ],
        }
    }
    text = RunRenderer().render(ShownRun(details([], functions=functions)))
    assert text.endswith(
        "recording rec: cpu-clock 1,234,567\n"
        "  cpu-clock  50.00%  f0 (prog)\n"
        "  cpu-clock  25.00%  f1 (prog)\n"
        "  cpu-clock  16.67%  f2 (prog)\n"
        "  cpu-clock  12.50%  f3 (prog)\n"
        "  cpu-clock  10.00%  f4 (prog)\n"
    )
