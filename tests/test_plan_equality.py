"""`schedule --json` prints the very plan `profile --dry-run --json` would run, for every option
that changes a plan, on Intel, AMD and Arm models (`--cpu`: no PMU needed) and on this machine:
both commands plan through `run.planning`, and this test keeps it so (#32). And the plan is what
runs (#41): each run's `perf_events` are the `-e` arguments of its perf command line in
`profile --dry-run`, event for event, the anchor included."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from autoprof.testing.cli import CliResult

# per model: two of its core events, one of a system-wide-only PMU, a --counters value that
# changes its plan (None: Intel's data lists each event's counters), a --reserve (Arm's takes
# the cycle counter) and a hardware anchor (Intel's and Arm's on a fixed counter: free; AMD's
# on a generic one: it costs runs)
MODELS = {
    "SKX": (
        "INST_RETIRED.ANY",
        "BR_MISP_RETIRED.ALL_BRANCHES",
        "UNC_M_CAS_COUNT.RD",
        None,
        "1",
        "CPU_CLK_UNHALTED.THREAD",
    ),
    "zen4": (
        "ex_ret_instr",
        "ls_dispatch.ld_dispatch",
        "local_processor_read_data_beats_cs0",
        "cpu=4",
        "1",
        "ls_not_halted_cyc",
    ),
    "neoverse-n1": (
        "INST_RETIRED",
        "BR_MIS_PRED_RETIRED",
        None,
        "armv8_pmuv3_0=3",
        "1",
        "CPU_CYCLES",
    ),
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
    "--anchor software": ["--anchor", "task-clock"],
    "--anchor hardware": ["--anchor", "ANCHOR"],
    "-e --anchor hardware": ["-e", "EVENT", "-e", "OTHER", "--anchor", "ANCHOR"],
    "--user --anchor": ["--user", "-e", "EVENT", "--anchor", "task-clock"],
    "--metrics --anchor": ["--metrics", "all", "--anchor", "task-clock"],
}


def _args(option: str, model: str, events_file: Path) -> list[str] | None:
    event, other, wide, counters, reserve, anchor = MODELS[model]
    given = {
        "ANCHOR": anchor,
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
FAST = {"every event", "-e", "-a -e uncore", "--user -e", "--metrics", "-e --anchor hardware"}


def _both(cli_run, args: list[str]) -> tuple[CliResult, CliResult]:
    planned = cli_run("schedule", "--json", *args)
    run = cli_run("profile", "--dry-run", "--json", *args, "--", "true")
    return planned, run


def command_line_events(cli_run, args: list[str]) -> list[list[str]]:
    """The `-e` arguments of each perf command line `profile --dry-run` prints, run by run."""
    dry = cli_run("profile", "--dry-run", *args, "--", "true")
    assert dry.returncode == 0, dry.stderr
    lines = [shlex.split(line) for line in dry.stdout.splitlines()]
    return [[argv[i + 1] for i, a in enumerate(argv) if a == "-e"] for argv in lines]


def assert_plan_is_what_runs(cli_run, args: list[str], planned: str) -> None:
    """Each planned run's perf events are the -e arguments of its perf, in order."""
    runs = json.loads(planned)["runs"]
    assert command_line_events(cli_run, args) == [run["perf_events"] for run in runs]


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
    assert_plan_is_what_runs(cli_run, ["--cpu", model, *args], planned.stdout)
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
    metrics, a hardware anchor that would take the last free counter, an event named beside an
    anchor that holds its counter, a value out of its range, a CPU list that is none."""
    refused = [
        ["--cpu", "SKX", "-e", "UNC_M_CAS_COUNT.RD"],
        ["--cpu", "zen4", "-e", "ex_ret_instr", "--metrics", "all"],
        ["--cpu", "zen4", "--user", "--metrics", "all"],
        ["--cpu", "zen4", "-e", "ex_ret_instr", "--anchor", "ls_not_halted_cyc", "--reserve", "5"],
        ["--cpu", "ICX", "-e", "INST_RETIRED.PREC_DIST", "--anchor", "INST_RETIRED.ANY"],
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
        assert_plan_is_what_runs(cli_run, args, planned.stdout)


def test_the_anchor_is_in_every_run_of_the_plan(cli_run):
    """The plan lists the anchor in every run, as perf counts it (#41: it was added on the way
    to perf, so `schedule` listed task-clock in one run of 57). A hardware anchor takes a
    counter in every run: on a fixed counter it is free (Intel's INST_RETIRED.ANY, Arm's
    CPU_CYCLES; the events that need that fixed counter are left out, with the reason); on a
    generic one it costs runs, which a note says."""
    for model, anchor, more in (
        ("zen4", "task-clock", False),
        ("SKX", "INST_RETIRED.ANY", False),
        ("neoverse-n1", "CPU_CYCLES", False),
        ("zen4", "ls_not_halted_cyc", True),
    ):
        plain = json.loads(cli_run("schedule", "--json", "--cpu", model).stdout)
        found = cli_run("schedule", "--json", "--cpu", model, "--anchor", anchor)
        assert found.returncode == 0, found.stderr
        plan = json.loads(found.stdout)
        assert all(anchor in [e["name"] for e in run["events"]] for run in plan["runs"]), model
        assert (len(plan["runs"]) > len(plain["runs"])) == more, model
        if anchor != "task-clock":
            [note] = found.stderr.splitlines()
            cost = f"{len(plan['runs']) - len(plain['runs'])} more than the {len(plain['runs'])}"
            assert f"anchor {anchor} takes" in note and "in every run" in note
            assert (cost in note) if more else "as many as without it" in note, note
    icx = json.loads(
        cli_run("schedule", "--json", "--cpu", "ICX", "--anchor", "INST_RETIRED.ANY").stdout
    )
    [left] = [x for x in icx["excluded"] if "anchor" in x["reason"]]
    assert left["name"] == "INST_RETIRED.PREC_DIST" and "fixed0" in left["reason"]
    metrics = cli_run(
        "schedule", "--cpu", "SKX", "--metrics", "all", "--anchor", "INST_RETIRED.ANY"
    )
    assert (
        metrics.returncode == 2 and "with --metrics, anchor on a software event" in metrics.stderr
    )
