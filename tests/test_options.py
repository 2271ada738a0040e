"""ProfileOptions, declared once: the command line, the job spec and the manifest agree on every
option, its range and its refusal message (derived from the declarations, so a new option is
tested here as soon as it is declared)."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest

from autoprof.commands.common import request_from
from autoprof.commands.profile import profile
from autoprof.commands.schedule import schedule
from autoprof.commands.submit import submit
from autoprof.errors import AutoprofError
from autoprof.queue.spec import JobSpec, Refused
from autoprof.run import outdir
from autoprof.run.options import EventSelection, ProfileOptions
from autoprof.testing.cli import invoke, parsed
from autoprof.util.declared import Option, kind_of, option_fields, spec_fields
from autoprof.util.records import read_json

OLD_PROFILE = Path(__file__).parent / "data" / "profile-ed64973"
SPEC_OPTIONS = [(f.name, option) for f, option in option_fields(ProfileOptions) if option.spec]
RANGED = [(name, option) for name, option in SPEC_OPTIONS if option.range_text]


def accepted(name: str, option: Option, cls: type = ProfileOptions):
    """A value other than the default that the option's range allows."""
    kind, _ = kind_of(name, cls)
    if kind is bool:
        return True
    if kind is tuple:  # repeatable (--region): one value given
        return ("hot",)
    if kind is str:
        return option.choices[0] if option.choices else "0-1"
    if option.high is not None:
        return kind(option.high)
    return kind((option.low or 0) + 1)


def refused(name: str, option: Option, cls: type = ProfileOptions) -> list:
    """Values just outside the option's range."""
    kind, _ = kind_of(name, cls)
    values = []
    if option.low is not None:
        values.append(kind(option.low if option.low_open else option.low - 1))
    if option.high is not None:
        values.append(kind(option.high + 1))
    return values


def argv(option: Option, value) -> list[str]:
    if isinstance(value, tuple):
        return [arg for item in value for arg in (option.flags[-1], item)]
    return [option.flags[-1]] if value is True else [option.flags[-1], str(value)]


def spec_with(options: dict) -> dict:
    return {"command": ["./w"], "profile_id": str(uuid.uuid4()), "options": options}


def test_the_ranges_are_declared():
    """Guards the derivations below against an empty table: the options #16 lists are there."""
    assert {"interval_ms", "repeat", "retries", "timeout", "anchor"} <= spec_fields(ProfileOptions)
    assert {"force", "part", "parts", "pids", "cgroup", "duration"}.isdisjoint(
        spec_fields(ProfileOptions)
    )
    ranges = {
        f.name: option.range_text
        for f, option in option_fields(ProfileOptions)
        if option.range_text
    }
    assert ranges == {
        "interval_ms": "10<=x<=60000",
        "repeat": "1<=x<=10000",
        "timeout": "x>0",
        "retries": "0<=x<=10",
        "part": "x>=1",
        "parts": "x>=1",
        "duration": "0.01<=x<=3600",
    }


@pytest.mark.parametrize(("name", "option"), SPEC_OPTIONS, ids=[n for n, _ in SPEC_OPTIONS])
def test_every_spec_option_is_taken_by_the_cli_and_the_job_spec(name, option):
    assert option.flags, f"{name} travels in a job spec but has no command-line flag"
    value = accepted(name, option)
    assert value != getattr(ProfileOptions(), name)
    for command in (profile, submit):
        params = parsed(command, [*argv(option, value), "--", "./w"])
        assert params[name] == value
    from_cli = request_from(parsed(profile, argv(option, value))).options
    spec = JobSpec.from_json(spec_with({name: value}))
    assert spec.profile_options() == from_cli
    assert getattr(from_cli, name) == value


@pytest.mark.parametrize(("name", "option"), RANGED, ids=[n for n, _ in RANGED])
def test_out_of_range_values_are_refused_by_the_cli_and_the_job_spec_alike(name, option):
    for value in refused(name, option):
        for command in (["profile"], ["submit", "--host", "h"]):
            result = invoke(*command, *argv(option, value), "--", "./w")
            assert result.returncode == 2
            assert result.output.count("\n") == 1, result.output
            said = result.output.removeprefix("autoprof: error: ").strip()
            assert said.startswith(f"{option.flags[-1]} {value!r} is not in the range")
        with pytest.raises(Refused) as caught:
            JobSpec.from_json(spec_with({name: value}))
        assert str(caught.value) == f"refused: {said}"


def test_wrong_types_and_unknown_options_are_refused_in_a_spec():
    with pytest.raises(Refused, match=r"^refused: --interval '100' is not a whole number$"):
        JobSpec.from_json(spec_with({"interval_ms": "100"}))
    with pytest.raises(Refused, match=r"^refused: --fail-fast 1 is not true or false$"):
        JobSpec.from_json(spec_with({"fail_fast": 1}))
    with pytest.raises(Refused, match=r"^refused: --repeat must be given$"):
        JobSpec.from_json(spec_with({"repeat": None}))
    with pytest.raises(Refused, match=r"^refused: unknown spec options field 'force'$"):
        JobSpec.from_json(spec_with({"force": True}))
    # a whole number is a number of seconds; JSON null is "no -I" and "no timeout"
    spec = JobSpec.from_json(spec_with({"timeout": 5, "interval_ms": None}))
    assert (spec.profile_options().timeout, spec.profile_options().interval_ms) == (5, None)


def test_a_part_must_be_one_of_the_parts():
    assert ProfileOptions(part=2, parts=3).problem() is None
    with pytest.raises(AutoprofError, match=r"^part 3 of 2 is not a valid part$"):
        ProfileOptions(part=3, parts=2).check()
    with pytest.raises(Refused, match=r"^refused: parts 0 is not in the range x>=1$"):
        JobSpec.from_json(spec_with({}) | {"part": 1, "parts": 0})


def test_help_shows_each_range_and_default_as_click_does():
    text = invoke("profile", "--help", terminal_width=200).output
    lines = {line.split()[0].rstrip(","): line for line in text.splitlines() if line[2:3] == "-"}
    assert "INTEGER RANGE" in lines["--interval"]
    assert "[default: 100; 10<=x<=60000]" in lines["--interval"]
    assert "[default: 0; 0<=x<=10]" in lines["--retries"]
    assert "FLOAT RANGE" in lines["--timeout"] and lines["--timeout"].endswith("[x>0]")
    assert lines["--duration"].endswith("[0.01<=x<=3600]")
    assert lines["-a"].endswith("Count on all CPUs (perf -a -A).")


def test_a_resume_keeps_the_options_that_say_what_the_numbers_mean():
    from autoprof.run.options import measuring_fields

    wanted = ("interval_ms", "system_wide", "cpu_list", "user", "emulate", "anchor", "regions")
    wanted += ("per_thread", "pin", "core_type", "duration")
    assert measuring_fields() == wanted


def test_json_ignores_unknown_keys_and_defaults_missing_ones():
    options = ProfileOptions.from_json({"repeat": 3, "from_a_newer_autoprof": 1})
    assert options == ProfileOptions(repeat=3)
    assert ProfileOptions.from_json({}) == ProfileOptions()


def test_a_manifest_records_what_the_numbers_mean_and_the_part_of_a_split_profile():
    plain = ProfileOptions(repeat=2, retries=3, fail_fast=True, force=True)
    assert plain.to_json() == {
        "interval_ms": 100,
        "repeat": 2,
        "system_wide": False,
        "cpu_list": None,
        "timeout": None,
        "anchor": None,
    }
    split = ProfileOptions(part=2, parts=3).to_json()
    assert (split["part"], split["parts"]) == (2, 3) and "duration" not in split
    attached = ProfileOptions(system_wide=True, duration=0.5).to_json()
    assert (attached["pids"], attached["cgroup"], attached["duration"]) == (None, None, 0.5)
    assert ProfileOptions(user=True).to_json()["user"] is True
    where = ProfileOptions(per_thread=True, pin="1", core_type="efficiency").to_json()
    assert (where["per_thread"], where["pin"], where["core_type"]) == (True, "1", "efficiency")
    for options in (plain, ProfileOptions(part=2, parts=3), ProfileOptions(duration=0.5)):
        assert ProfileOptions.from_json(options.to_json()).to_json() == options.to_json()


def test_where_and_how_the_command_runs_is_checked_the_one_way():
    assert ProfileOptions(per_thread=True, pin="0-1,3", core_type="performance").problem() is None
    said = {
        "--pin: CPU list 'x1': expected numbers and ranges such as 0-3,5": {"pin": "x1"},
        "--core-type 'big' is not one of performance, efficiency": {"core_type": "big"},
        "--per-thread counts the threads of a command: not with -p, --cgroup, -a or --cpu-list": {
            "per_thread": True,
            "system_wide": True,
        },
    }
    for message, values in said.items():
        assert ProfileOptions(**values).problem() == message
        with pytest.raises(Refused) as caught:
            JobSpec.from_json(spec_with(values))
        assert str(caught.value) == f"refused: {message}"
    result = invoke("profile", "--core-type", "big", "--", "./w")
    assert (result.returncode, result.output) == (
        2,
        "autoprof: error: --core-type 'big' is not one of performance, efficiency\n",
    )


def test_a_manifest_written_before_options_were_typed_reads_and_writes_back_unchanged(tmp_path):
    out = shutil.copytree(OLD_PROFILE, tmp_path / "out")
    manifest = outdir.read_manifest(out)
    assert isinstance(manifest.options, ProfileOptions)
    assert (manifest.options.repeat, manifest.options.interval_ms) == (1, 100)
    assert (manifest.options.part, manifest.options.parts) == (1, 1)
    before = read_json(out / outdir.MANIFEST)["options"]
    outdir.write_manifest(out, manifest)
    assert read_json(out / outdir.MANIFEST)["options"] == before


SELECTION = list(option_fields(EventSelection))


@pytest.mark.parametrize(("field", "option"), SELECTION, ids=[f.name for f, _ in SELECTION])
def test_every_selection_flag_is_taken_by_the_catalog_commands_and_the_job_spec(field, option):
    """EventSelection, declared once: `schedule`/`profile` (catalog_options), `submit`
    (selection_options) and a job spec's `selection` take each field and refuse a bad value
    with the same line."""
    name = field.name
    value = accepted(name, option, EventSelection)
    assert value != field.default
    for command, rest in ((profile, ["--", "./w"]), (submit, ["--", "./w"]), (schedule, [])):
        params = parsed(command, [*argv(option, value), *rest])
        assert params[name] == value
    spec = JobSpec.from_json(spec_with({}) | {"selection": {name: value}})
    assert spec.selection == {name: value}
    for bad in refused(name, option, EventSelection):
        said = []
        for command, rest in ((["schedule", "--json"], []), (["submit", "--host", "h"], ["./w"])):
            result = invoke(*command, *argv(option, bad), *rest)
            assert result.returncode == 2 and result.output.count("\n") == 1, result.output
            said.append(result.output.removeprefix("autoprof: error: ").strip())
        with pytest.raises(Refused) as caught:
            JobSpec.from_json(spec_with({}) | {"selection": {name: bad}})
        said.append(str(caught.value).removeprefix("refused: "))
        assert said == [f"{option.flags[-1]} {bad!r} is not in the range {option.range_text}"] * 3


def test_a_selection_of_the_wrong_type_is_refused_in_a_spec():
    with pytest.raises(Refused, match=r"^refused: --deprecated 1 is not true or false$"):
        JobSpec.from_json(spec_with({}) | {"selection": {"deprecated": 1}})
    with pytest.raises(Refused, match=r"^refused: --reserve True is not a whole number$"):
        JobSpec.from_json(spec_with({}) | {"selection": {"reserve": True}})


def test_bench_takes_reserve_as_the_catalog_commands_do():
    option = next(o for f, o in option_fields(EventSelection) if f.name == "reserve")
    result = invoke("bench", "--reserve", "9", "--", "true")
    assert result.returncode == 2
    assert (
        result.output.strip()
        == f"autoprof: error: --reserve 9 is not in the range {option.range_text}"
    )


@pytest.mark.parametrize(
    ("field", "flags", "value"),
    [
        ("repeat", ["--repeat"], 10_001),
        ("repeat", ["--repeat"], 0),
        ("interval_ms", ["--interval"], 60_001),
        ("interval_ms", ["--interval"], 5),
        ("reserve", ["--reserve"], 9),
        ("duration", ["-p", "1", "--duration"], 3_601),
    ],
)
def test_the_web_form_has_the_limits_of_the_command_line(cli_run, field, flags, value):
    """One declared limit per option (run.options): the web's form refuses what `profile`
    refuses, in the same words, and takes what it takes (#32: the web had its own, repeat <= 100
    and interval <= 60,000 ms)."""
    from autoprof.web.form import JobRequest

    form = {"tool": "profile", "command": "true", "events": ["task-clock"]}
    command = ["--", "true"]
    if field == "duration":  # an attached profile's
        form, command = {**form, "command": "", "pid": 1}, []
    cli = cli_run("profile", "--dry-run", *flags, str(value), "-e", "task-clock", *command)
    [line] = cli.stderr.strip().splitlines()
    with pytest.raises(AutoprofError) as refused:
        JobRequest.from_form({**form, field: str(value)})  # the form sends its inputs' text
    assert line == f"autoprof: error: {refused.value}" and cli.returncode == 2
    inside = {"repeat": 100, "interval_ms": 60_000, "reserve": 1, "duration": 3_600}[field]
    assert getattr(JobRequest.from_form({**form, field: inside}), field) == inside
