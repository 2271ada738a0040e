"""Per-function rows in the store: a profile folder holding a sampled recording (`record -o
OUT/rec`) uploads its report rows; `runs show` lists them and `runs export --report` gives back
what `autoprof report --csv` printed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from autoprof.run import outdir
from autoprof.testing.synthetic_out import make_out
from tests.recordings import hotspots_recording  # noqa: F401 (a fixture)
from tests.test_store import autoprof, count, sqlite_url, store_url  # noqa: F401 (fixtures)


@pytest.fixture
def out_with_recording(hotspots_recording: Path, tmp_path: Path) -> Path:  # noqa: F811
    out = make_out(tmp_path / "out", runs=1, repeats=1, intervals=3)
    shutil.copytree(hotspots_recording, out / "rec")
    return out


@pytest.mark.slow
def test_function_rows_round_trip(out_with_recording: Path, store_url: str, tmp_path: Path):  # noqa: F811
    up = autoprof("upload", out_with_recording, store=store_url)
    assert up.exit_code == 0, up.output
    run_id = outdir.read_manifest(out_with_recording).id
    shown = json.loads(autoprof("runs", "show", run_id, "--json", store=store_url).stdout)
    rec = shown["functions"]["rec"]
    assert rec["events"] == ["cpu-clock", "page-faults"]
    assert [f["symbol"] for f in rec["functions"][:3]] == ["heavy", "medium", "touch"]
    text = autoprof("runs", "show", run_id, store=store_url).stdout
    assert "recording rec: cpu-clock" in text and "heavy" in text
    exported = autoprof("runs", "export", run_id, "--report", "-o", "-", store=store_url)
    assert exported.exit_code == 0, exported.output
    direct = autoprof("report", out_with_recording / "rec", "--csv", "-")
    assert exported.stdout == direct.stdout
    target = tmp_path / "functions.csv"
    to_file = autoprof("runs", "export", run_id, "--report", "-o", target, store=store_url)
    assert to_file.exit_code == 0 and target.read_text() == direct.stdout
    assert count(store_url, "function_row") > 0
    assert autoprof("runs", "delete", run_id, "--yes", store=store_url).exit_code == 0
    assert count(store_url, "function_row") == 0


def test_a_run_without_recordings(sqlite_url: str, tmp_path: Path):  # noqa: F811
    out = make_out(tmp_path / "out", runs=1, repeats=1, intervals=3)
    assert autoprof("upload", out, store=sqlite_url).exit_code == 0
    run_id = outdir.read_manifest(out).id
    shown = json.loads(autoprof("runs", "show", run_id, "--json", store=sqlite_url).stdout)
    assert shown["functions"] == {}
    bad = autoprof("runs", "export", run_id, "--report", "-o", "-", store=sqlite_url)
    assert bad.exit_code != 0 and "has no per-function rows" in bad.output


@pytest.mark.slow
def test_several_recordings_are_named_on_export(
    hotspots_recording: Path,  # noqa: F811
    sqlite_url: str,  # noqa: F811
    tmp_path: Path,
):
    out = make_out(tmp_path / "out", runs=1, repeats=1, intervals=3)
    for name in ("a", "b"):
        shutil.copytree(hotspots_recording, out / name)
    assert autoprof("upload", out, store=sqlite_url).exit_code == 0
    run_id = outdir.read_manifest(out).id
    both = autoprof("runs", "export", run_id, "--report", "-o", "-", store=sqlite_url)
    assert both.exit_code != 0 and "holds recordings a, b" in both.output
    one = autoprof("runs", "export", run_id, "--report", "--recording", "b", "-o", "-",
                   store=sqlite_url)  # fmt: skip
    assert one.exit_code == 0 and one.stdout.startswith("symbol,dso,cpu-clock,")
