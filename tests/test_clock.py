"""UTC times: the store's naive UTC, RQ's naive-or-aware times, the text written to files."""

from __future__ import annotations

import datetime as dt

import pytest

from autoprof.util import clock


def test_naive_utc_converts_offsets_and_keeps_naive_times():
    assert clock.naive_utc("2024-06-01T14:00:00+02:00") == dt.datetime(2024, 6, 1, 12)
    assert clock.naive_utc("2024-06-01T12:00:00") == dt.datetime(2024, 6, 1, 12)
    aware = dt.datetime(2024, 6, 1, 7, tzinfo=dt.timezone(dt.timedelta(hours=-5)))
    assert clock.naive_utc(aware) == dt.datetime(2024, 6, 1, 12)
    assert clock.naive_utc(None) is None and clock.naive_utc("") is None


@pytest.mark.parametrize("bad", ["yesterday", 17])
def test_naive_utc_refuses_what_is_no_time(bad):
    with pytest.raises((ValueError, TypeError)):
        clock.naive_utc(bad)


def test_aware_utc_reads_naive_as_utc():
    naive = dt.datetime(2024, 6, 1, 12)
    assert clock.aware_utc(naive) == dt.datetime(2024, 6, 1, 12, tzinfo=dt.UTC)
    paris = dt.datetime(2024, 6, 1, 14, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert clock.aware_utc(paris).tzinfo == dt.UTC and clock.aware_utc(paris).hour == 12
    assert clock.aware_utc(None) is None


def test_now_iso_is_aware_text_and_when_is_a_table_cell():
    stamp = dt.datetime.fromisoformat(clock.now_iso())
    assert stamp.utcoffset() == dt.timedelta(0)
    assert abs(clock.naive_now() - stamp.replace(tzinfo=None)) < dt.timedelta(minutes=1)
    assert clock.when(dt.datetime(2024, 6, 1, 12, 0, 5, 123)) == "2024-06-01 12:00:05"
    assert clock.when(None) == "-"
