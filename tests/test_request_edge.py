"""The CLI edge builds one typed `Request` from click's values (`commands.common.request_from`,
`takes_request`): each value by its name, whatever the command and the order of its options;
a value out of its declared range is refused there, what does not go together by
`Request.check`. No perf, no process."""

from __future__ import annotations

import dataclasses

import pytest

from autoprof.commands.common import REQUEST_VALUES, request_from
from autoprof.commands.profile import profile
from autoprof.commands.schedule import schedule
from autoprof.commands.submit import submit
from autoprof.errors import AutoprofError
from autoprof.run.options import EventSelection, ProfileOptions
from autoprof.run.request import Request
from autoprof.testing.cli import parsed

ARGS = ["-e", "task-clock", "--cpu-list", "0-1", "--reserve", "1", "--user", "--cpu", "SKX"]
SHUFFLED = ["--user", "--cpu", "SKX", "--reserve", "1", "-e", "task-clock", "--cpu-list", "0-1"]


def values(command, args: list[str]) -> dict:
    return parsed(command, args)


def test_every_command_gives_the_same_request_for_the_same_options(tmp_path):
    listed = tmp_path / "events.txt"
    listed.write_text("page-faults  # a comment\n\n")
    args = [*ARGS, "--events", str(listed)]
    planned = request_from(values(schedule, args))
    measured = request_from(values(profile, [*args, "--", "./w", "x"]))
    expected = Request(
        events=["task-clock", "page-faults"],
        options=ProfileOptions(cpu_list="0-1", user=True),
        selection=EventSelection(reserve=1),
        cpu="SKX",
    )
    assert planned == expected
    assert measured.command == ["./w", "x"]
    assert measured == dataclasses.replace(expected, command=["./w", "x"])
    # the options in another order: the same request (nothing is taken out in turn)
    assert request_from(values(schedule, [*SHUFFLED, "--events", str(listed)])) == expected


def test_what_a_command_does_not_take_keeps_its_default():
    queued = request_from(values(submit, ["--host", "h", "--tag", "k=v", "--", "./w"]))
    assert queued == Request(command=["./w"], tags={"k": "v"})
    assert request_from({}) == Request()


def test_the_metrics_and_catalog_values_reach_their_fields():
    args = ["--metrics", "ipc", "--metrics-file", "m.yaml", "--consistent", "--smt", "off"]
    args += ["--counters", "amd_df=4", "--no-probe", "--events-dir", "ev"]
    made = request_from(values(schedule, args))
    assert (made.metrics, made.metrics_files, made.consistent) == (("ipc",), ("m.yaml",), True)
    assert (made.smt, made.counters, made.probe, made.events_dir) == (
        "off",
        ("amd_df=4",),
        False,
        "ev",
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--interval", "5"], "--interval 5 is not in the range 10<=x<=60000"),
        (["--reserve", "9"], "--reserve 9 is not in the range 0<=x<=8"),
    ],
)
def test_a_value_out_of_its_range_is_refused_at_the_edge(args, says):
    with pytest.raises(AutoprofError) as caught:
        request_from(values(profile, [*args, "--", "./w"]))
    assert str(caught.value) == says


def test_what_does_not_go_together_is_the_requests_check():
    made = request_from(values(schedule, ["--metrics", "all", "-e", "cycles"]))
    with pytest.raises(
        AutoprofError, match=r"^give events \(-e, --events\) or --metrics, not both$"
    ):
        made.check()


def test_the_commands_own_values_are_not_the_requests():
    """A command keeps its own options (profile's -o, --dry-run, --json, --resume); every
    value of the request's is one REQUEST_VALUES names."""
    params = values(profile, ["--dry-run", "-o", "x", "--", "./w"])
    own = {name for name in params if name not in REQUEST_VALUES}
    assert own == {"output", "dry_run", "as_json", "resume"}
