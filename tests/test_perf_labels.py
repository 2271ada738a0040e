"""perf's spellings of events (autoprof.perf.labels), of a refused event and of a finished
recording."""

from __future__ import annotations

import pytest

from autoprof.perf import labels
from autoprof.perf.record import wrote_data
from autoprof.perf.unsupported import Unsupported

TABLE = {
    text: name
    for name, pmu, spec in [
        ("UNC_CHA_CLOCKTICKS", "uncore_cha", "uncore_cha/event=0x0,name=UNC_CHA_CLOCKTICKS/"),
        ("task-clock", "software", "task-clock"),
        ("sched:sched_switch", "tracepoint", "sched:sched_switch"),
    ]
    for text in labels.printed_forms(pmu, name, spec)
}


@pytest.mark.parametrize(
    ("printed", "found"),
    [
        ("uncore_cha/UNC_CHA_CLOCKTICKS/", ("UNC_CHA_CLOCKTICKS", "")),
        ("UNC_CHA_CLOCKTICKS", ("UNC_CHA_CLOCKTICKS", "")),
        ("task-clock:u", ("task-clock", "u")),
        ("sched:sched_switchu", ("sched:sched_switch", "u")),  # a tracepoint: no second colon
        ("uncore_cha/UNC_CHA_CLOCKTICKS/u", ("UNC_CHA_CLOCKTICKS", "u")),
        ("cycles", (None, "")),
        ("task-clockxyz", (None, "")),  # not a modifier perf adds
    ],
)
def test_resolve_finds_the_planned_event_and_the_modifier(printed, found):
    assert labels.resolve(printed, TABLE) == found


def test_uncore_boxes_both_ways_perf_names_them():
    assert labels.split_instance("uncore_cha_3/event=0x0/") == (
        "uncore_cha/event=0x0/",
        "uncore_cha_3",
    )
    assert labels.split_instance("UNC_CHA_CLOCKTICKS [uncore_cha_3]") == (
        "UNC_CHA_CLOCKTICKS",
        "uncore_cha_3",
    )
    assert labels.split_instance("cycles") == ("cycles", None)
    assert labels.box_name("uncore_cha", 3) == "uncore_cha_3"
    assert labels.is_uncore("uncore_imc") and not labels.is_uncore("cpu")


def test_a_finished_recording_is_told_by_perfs_last_message():
    assert wrote_data("[ perf record: Captured and wrote 0.012 MB perf.data (34 samples) ]\n")
    assert not wrote_data("Error:\nThe sys_perf_event_open() syscall returned with 1\n")


def test_unsupported_reads_every_key_it_was_written_with():
    refused = Unsupported("cpu/x/", "cpu", "perf said no")
    assert Unsupported.from_json(refused.to_json()) == refused
    assert Unsupported.from_json({"event": "cpu/x/", "pmu": "cpu", "reason": "perf said no"}) == (
        refused
    )
    assert Unsupported.from_json({"spec": "cpu/x/", "added_later": 1}) == Unsupported("cpu/x/")
