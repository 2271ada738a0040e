"""Files on disk keep working across versions: a profile folder written by main at ed64973
(before files carried a `format`) aggregates, resumes and uploads; a file of a newer format is
refused with one line.

The folder in tests/data is never touched: each test works on a copy.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import time
from dataclasses import replace
from pathlib import Path

import pytest

from autoprof.catalog import machine
from autoprof.errors import AutoprofError, NewerFormat
from autoprof.results import csvfile, sanity_report
from autoprof.run import journal, outdir
from autoprof.testing.cli import invoke
from autoprof.util.records import read_json, write_json
from autoprof.util.status import RunStatus

DATA = Path(__file__).parent / "data" / "profile-ed64973"
RUN1 = Path(outdir.RUNS) / "run0001-rep1"
RUN2 = Path(outdir.RUNS) / "run0002-rep1"
# the command line that wrote DATA (README.md there)
EVENTS = [f"mem:0x{0x10000 + 8 * i:x}:w" for i in range(6)] + ["task-clock", "page-faults"]
COMMAND = ["sleep", "0.5"]


@pytest.fixture
def old(tmp_path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(DATA, out)
    return out


def edit_json(path: Path, **changes) -> None:
    path.write_text(json.dumps(json.loads(path.read_text()) | changes))


def refused_in_one_line(result, path: Path, found: int, known: int) -> None:
    """Refused with the one line the brief fixes, and nothing else: never a traceback."""
    assert result.returncode == 2, result.output
    assert result.output.strip().splitlines() == [
        f"autoprof: error: {path}: written by a newer autoprof (format {found}, "
        f"this one reads up to {known}); upgrade autoprof"
    ]


def test_old_folder_aggregates_run_1_and_reports_run_2_missing(old):
    before = csvfile.read_csv(DATA / outdir.RESULTS)
    (old / outdir.RESULTS).unlink()
    (old / outdir.REPORT).unlink()
    result = invoke("aggregate", old)
    assert result.returncode == 0, result.output
    frame = csvfile.read_csv(old / outdir.RESULTS)
    assert set(frame["RUN"]) == {1}
    assert len(frame) == len(before)
    sums = frame.groupby("EVENT_NAME")["SAMPLE_VALUE"].sum().to_dict()
    assert sums == before.groupby("EVENT_NAME")["SAMPLE_VALUE"].sum().to_dict()
    runs = json.loads((old / outdir.REPORT).read_text())["runs"]
    assert (runs["expected"], runs["finished"]) == (2, 1)
    assert runs["missing"] == [{"run": 2, "repeat": 1}]


@pytest.mark.slow
def test_old_folder_resumes_run_2_only(old):
    if shutil.which("perf") is None:
        pytest.skip("needs perf")
    cpu = json.loads((DATA / outdir.MANIFEST).read_text())["machine"]["cpu_id"]
    if machine.cpu_id() != cpu:
        pytest.skip(f"the test folder's plan is for {cpu}, not this machine's {machine.cpu_id()}")
    run1 = (old / RUN1 / outdir.RUN_RECORD).read_bytes()
    args = [a for e in EVENTS for a in ("-e", e)]
    result = invoke("profile", *args, "-o", old, "--", *COMMAND)
    assert result.returncode == 0, result.output
    assert (old / RUN1 / outdir.RUN_RECORD).read_bytes() == run1  # not run again
    record = outdir.read_run_record(old / RUN2)
    assert record.status == RunStatus.OK
    assert str(old / RUN2) in " ".join(record.perf_argv)  # measured here, in the copy
    entries = journal.read(old)
    assert [(e.run, e.status) for e in entries] == [(1, "ok"), (2, "ok")]
    assert json.loads((old / outdir.JOURNAL).read_text().splitlines()[-1])["format"] == 1
    assert invoke("aggregate", old).returncode == 0
    runs = json.loads((old / outdir.REPORT).read_text())["runs"]
    assert (runs["finished"], runs["missing"]) == (2, [])
    assert set(csvfile.read_csv(old / outdir.RESULTS)["RUN"]) == {1, 2}


def test_old_folder_uploads_and_reads_back(old, tmp_path):
    store = f"sqlite:///{tmp_path / 'store.db'}"
    uploaded = invoke("upload", old, "--store", store)
    assert uploaded.returncode == 0, uploaded.output
    listing = invoke("runs", "list", "--store", store)
    assert listing.returncode == 0, listing.output
    ids = [line.split()[0] for line in listing.output.splitlines()[1:]]
    assert ids == [outdir.read_manifest(DATA).id]


def test_old_records_read_and_write_the_current_format(old):
    manifest = outdir.read_manifest(old)
    assert manifest.command == COMMAND
    outdir.write_manifest(old, manifest)
    written = json.loads((old / outdir.MANIFEST).read_text())
    assert written["format"] == outdir.Manifest.FORMAT
    assert outdir.read_manifest(old) == manifest
    record = outdir.read_run_record(old / RUN1)
    assert (record.run, record.status, record.attempt) == (1, "ok", 1)


def test_unknown_keys_are_ignored_and_missing_ones_defaulted():
    data = json.loads((DATA / RUN1 / outdir.RUN_RECORD).read_text())
    copy = json.loads(json.dumps(data))
    newer_field = dict(data, added_later="x")
    del newer_field["attempt"], newer_field["perf_pid"]
    record = outdir.RunRecord.from_json(newer_field)
    assert (record.attempt, record.perf_pid) == (1, None)
    assert record.events[0].name == "mem:0x10000:w"
    assert data == copy  # from_json changes nothing it is given
    entry = journal.Entry.from_json({"run": 1, "repeat": 1, "status": "ok", "later": 1})
    assert entry == journal.Entry(1, 1, "ok")


def test_journal_entries_are_read_back_in_order_once_synced(tmp_path):
    """Entries are written as they come and fsynced by the journal's own thread; once synced
    the file is closed, and a later append opens it again."""
    kept = journal.Journal(tmp_path)
    for repeat in range(1, 51):
        kept.append(journal.Entry(1, repeat, "ok", folders=[f"run0001-rep{repeat}"]))
    kept.synced()
    kept.append(journal.Entry(2, 1, "workload-failed"))
    kept.synced()
    entries = journal.read(tmp_path)
    assert [(e.run, e.repeat) for e in entries] == [(1, r) for r in range(1, 51)] + [(2, 1)]
    assert entries[0].folders == ["run0001-rep1"]
    for repeat, record in ((49, ""), (50, "{}")):  # emptied by a power cut, kept
        (tmp_path / outdir.RUNS / f"run0001-rep{repeat}").mkdir(parents=True)
        (tmp_path / outdir.RUNS / f"run0001-rep{repeat}" / outdir.RUN_RECORD).write_text(record)
    assert journal.finished(tmp_path) == {(1, 50), (2, 1)}  # the others' folders are gone


def test_journal_fsyncs_at_most_once_a_pause_and_last_after_the_last_entry(tmp_path, monkeypatch):
    """Runs shorter than an fsync share one: the journal's thread pauses SYNC_PAUSE_S after
    each, and the entries appended meanwhile are synced together after it; `synced` ends the
    pause and syncs what is left before it returns."""
    syncs: list[tuple[float, int]] = []  # (when, the file's length then)
    real = os.fdatasync

    def counted(fd: int) -> None:
        real(fd)
        syncs.append((time.monotonic(), os.fstat(fd).st_size))

    monkeypatch.setattr(os, "fdatasync", counted)
    kept = journal.Journal(tmp_path)
    start = time.monotonic()
    for repeat in range(1, 201):
        kept.append(journal.Entry(1, repeat, "ok", folders=[f"run0001-rep{repeat}"]))
        time.sleep(0.002)
    kept.synced()
    elapsed = time.monotonic() - start
    assert len(syncs) <= elapsed / journal.SYNC_PAUSE_S + 2  # one a pause, and the last
    assert all(b - a >= journal.SYNC_PAUSE_S for (a, _), (b, _) in itertools.pairwise(syncs[:-1]))
    assert syncs[-1][1] == (tmp_path / outdir.JOURNAL).stat().st_size  # the last entry's too
    assert len(journal.read(tmp_path)) == 200


def test_resume_checks_it_is_the_same_profile(old):
    manifest = outdir.read_manifest(old)
    options, machine = manifest.options, manifest.machine
    manifest.check_resume(old, COMMAND, manifest.plan, options, machine)  # the same: resumes
    refusals = {
        "another command": (["true"], manifest.plan, options, machine),
        "another event plan": (COMMAND, {"runs": []}, options, machine),
        "part 1 of 1 of this profile, not part 2 of 2": (
            COMMAND,
            manifest.plan,
            replace(options, part=2, parts=2),
            machine,
        ),
        "other interval_ms": (COMMAND, manifest.plan, replace(options, interval_ms=10), machine),
        "another CPU": (COMMAND, manifest.plan, options, replace(machine, cpu_id="Other-6-1-1")),
    }
    for message, args in refusals.items():
        with pytest.raises(AutoprofError, match=message):
            manifest.check_resume(old, *args)


@pytest.mark.parametrize("file", [outdir.MANIFEST, str(RUN1 / outdir.RUN_RECORD)])
def test_newer_manifest_or_run_record_is_refused(old, file):
    edit_json(old / file, format=999)
    refused_in_one_line(invoke("aggregate", old), old / file, 999, 1)


def test_newer_manifest_is_refused_by_upload(old, tmp_path):
    edit_json(old / outdir.MANIFEST, format=999)
    result = invoke("upload", old, "--store", f"sqlite:///{tmp_path / 'store.db'}")
    refused_in_one_line(result, old / outdir.MANIFEST, 999, 1)


def test_newer_report_is_refused(old, tmp_path):
    edit_json(old / outdir.REPORT, format=999)
    result = invoke("upload", old, "--store", f"sqlite:///{tmp_path / 'store.db'}")
    refused_in_one_line(result, old / outdir.REPORT, 999, sanity_report.FORMAT)


def test_newer_journal_line_is_refused(old):
    with (old / outdir.JOURNAL).open("a") as fh:
        fh.write(json.dumps({"format": 999, "run": 2, "repeat": 1, "status": "ok"}) + "\n")
    with pytest.raises(NewerFormat) as refused:
        journal.finished(old)
    assert str(refused.value) == (
        f"{old / outdir.JOURNAL}: written by a newer autoprof (format 999, this one reads up "
        "to 1); upgrade autoprof"
    )


def test_a_record_is_written_whole_or_not_at_all(tmp_path):
    """The one atomic JSON writer (records, the catalog cache, the counters probe): a write that
    fails leaves the old file as it was and no temp file; the umask decides the default mode."""
    path = tmp_path / "record.json"
    write_json(path, {"format": 1, "runs": [1, 2]})
    assert read_json(path) == {"format": 1, "runs": [1, 2]}
    assert path.read_text().endswith("\n")
    with pytest.raises(TypeError):
        write_json(path, {"format": 1, "runs": object()})  # not JSON: nothing written
    (tmp_path / "folder").mkdir()
    with pytest.raises(OSError):
        write_json(tmp_path / "folder", [1])  # the rename fails: its temp file goes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder", "record.json"]
    assert read_json(path) == {"format": 1, "runs": [1, 2]}
    write_json(path, [1, {"a": 2}], compact=True)
    assert path.read_text() == '[1,{"a":2}]'


def test_a_run_record_is_written_a_key_a_line_and_reads_back_the_same(old):
    """run.json, written every run, goes through the C encoder a key at a time (`indent` would
    take Python's): still a key per line for a reader, and the same record read back."""
    record = outdir.read_run_record(old / RUN1)
    record.error = 'a "quoted"\nline'
    outdir.write_run_record(old / RUN1, record)
    text = (old / RUN1 / outdir.RUN_RECORD).read_text()
    lines = text.splitlines()
    assert (lines[0], lines[-1], text[-1]) == ("{", "}", "\n")
    assert [line.split('"')[1] for line in lines[1:-1]] == list(record.to_json())
    assert outdir.read_run_record(old / RUN1) == record
