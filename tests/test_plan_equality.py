"""`schedule --json` prints the very plan `profile --dry-run --json` would run, for every option
that changes a plan, on Intel, AMD and Arm models (`--cpu`: no PMU needed) and on this machine:
both commands plan through `run.planning`, and this test keeps it so (#32)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoprof.testing.cli import CliResult

# per model: two of its core events, one of a system-wide-only PMU, a --counters value that
# changes its plan (None: Intel's data lists each event's counters) and a --reserve (Arm's
# takes the cycle counter)
MODELS = {
    "SKX": ("INST_RETIRED.ANY", "BR_MISP_RETIRED.ALL_BRANCHES", "UNC_M_CAS_COUNT.RD", None, "1"),
    "zen4": (
        "ex_ret_instr",
        "ls_dispatch.ld_dispatch",
        "local_processor_read_data_beats_cs0",
        "cpu=4",
        "1",
    ),
    "neoverse-n1": ("INST_RETIRED", "BR_MIS_PRED_RETIRED", None, "armv8_pmuv3_0=3", "1"),
}

# the options that change a plan, each with what it needs (EVENT, WIDE_EVENT, COUNTERS, FILE,
# RESERVE: the model's); left out where the model has none to give
OPTIONS = {
    "every event": [],
    "-e": ["-e", "EVENT", "-e", "OTHER"],
    "--events": ["--events", "FILE"],
    "--counters": ["--counters", "COUNTERS"],
    "--reserve": ["--reserve", "RESERVE"],
    "--smt off": ["--smt", "off"],
    "--deprecated": ["--deprecated"],
    "--experimental": ["--experimental"],
    "--offcore-matrix": ["--offcore-matrix"],
    "-a": ["-a"],
    "--cpu-list": ["--cpu-list", "0"],
    "-a -e uncore": ["-a", "-e", "WIDE_EVENT", "-e", "EVENT"],
    "--user": ["--user"],
    "--user -e": ["--user", "-e", "EVENT"],
    "--metrics": ["--metrics", "all"],
    "--metrics --consistent": ["--metrics", "all", "--consistent"],
    "--metrics -a": ["--metrics", "all", "-a"],
    "--metrics-file": ["--metrics-file", "software"],
}


def _args(option: str, model: str, events_file: Path) -> list[str] | None:
    event, other, wide, counters, reserve = MODELS[model]
    given = {
        "RESERVE": reserve,
        "EVENT": event,
        "OTHER": other,
        "WIDE_EVENT": wide,
        "COUNTERS": counters,
        "FILE": str(events_file),
    }
    args = [given.get(a, a) for a in OPTIONS[option]]
    return None if None in args else [str(a) for a in args]


# options whose plan equals the model's plan of every event (its data has nothing they change:
# SKX has no offcore matrix files, zen4's events no SMT, deprecated or experimental ones, Arm
# no system-wide-only PMU)
UNCHANGED = {
    "SKX": {"--offcore-matrix"},
    "zen4": {"--smt off", "--deprecated", "--experimental", "--offcore-matrix"},
    "neoverse-n1": {
        "--smt off",
        "--deprecated",
        "--experimental",
        "--offcore-matrix",
        "-a",
        "--cpu-list",
    },
}
# the cases `make test-fast` runs; `make test` runs all (each new set of catalog options reads
# the model's event data again: a second or two each)
FAST = {"every event", "-e", "-a -e uncore", "--user -e", "--metrics"}


def _both(cli_run, args: list[str]) -> tuple[CliResult, CliResult]:
    planned = cli_run("schedule", "--json", *args)
    run = cli_run("profile", "--dry-run", "--json", *args, "--", "true")
    return planned, run


def _cases():
    for model in MODELS:
        for option in OPTIONS:
            if _args(option, model, Path("events.txt")) is None:
                continue  # the model has no value to give it
            marks = () if option in FAST else (pytest.mark.slow,)
            yield pytest.param(model, option, marks=marks, id=f"{model}:{option}")


@pytest.mark.parametrize(("model", "option"), list(_cases()))
def test_schedule_prints_the_plan_profile_runs(model, option, cli_run, tmp_path):
    events_file = tmp_path / "events.txt"
    events_file.write_text(f"# two events\n{MODELS[model][0]}\n{MODELS[model][1]}  # a comment\n")
    args = _args(option, model, events_file)
    assert args is not None  # `_cases` gives only these
    planned, run = _both(cli_run, ["--cpu", model, *args])
    assert planned.returncode == 0, planned.stderr
    assert run.returncode == 0, run.stderr
    assert planned.stdout == run.stdout  # byte for byte
    assert json.loads(planned.stdout)["runs"]
    # the option changed the plan (where the model's data gives it something to change), or
    # this would show nothing
    every = cli_run("schedule", "--json", "--cpu", model).stdout
    if option != "every event":
        assert (planned.stdout == every) == (option in UNCHANGED[model])
    if option == "--events":  # a file of the -e events is their plan
        same = cli_run("schedule", "--json", "--cpu", model, *_args("-e", model, events_file))
        assert same.stdout == planned.stdout


def test_schedule_and_profile_refuse_alike(cli_run):
    """What planning refuses, both refuse in the same line (status 2): an event of a
    system-wide-only PMU in a command's profile, events and metrics together, --user with
    metrics, an anchor that needs a counter, a value out of its range, a CPU list that is none."""
    refused = [
        ["--cpu", "SKX", "-e", "UNC_M_CAS_COUNT.RD"],
        ["--cpu", "zen4", "-e", "ex_ret_instr", "--metrics", "all"],
        ["--cpu", "zen4", "--user", "--metrics", "all"],
        ["--cpu", "SKX", "-e", "INST_RETIRED.ANY", "--anchor", "INST_RETIRED.ANY"],
        ["--cpu", "neoverse-n1", "--reserve", "9"],
        ["--cpu", "SKX", "-e", "INST_RETIRED.ANY", "--cpu-list", "3-1"],
    ]
    for args in refused:
        planned, run = _both(cli_run, args)
        assert planned.returncode == run.returncode == 2, args
        [line] = planned.stderr.strip().splitlines()
        assert line.startswith("autoprof: error: ") and run.stderr.strip() == line, args
    alone = cli_run("profile", "--json", "-e", "task-clock", "--", "true")
    assert alone.returncode == 2 and "--json prints the plan of --dry-run" in alone.stderr


def test_this_machine_plans_alike(cli_run):
    """On this machine (its own catalog: no hardware events on a VM without a PMU) the anchor,
    --user and the events a profile of a command counts."""
    for args in (
        [],
        ["-e", "task-clock", "-e", "page-faults", "--anchor", "cpu-clock"],
        ["--user", "-e", "task-clock", "--anchor", "task-clock"],
        ["--anchor", "task-clock"],
    ):
        planned, run = _both(cli_run, args)
        assert planned.returncode == 0, (args, planned.stderr)
        assert planned.stdout == run.stdout, args
