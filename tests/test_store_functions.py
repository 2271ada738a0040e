"""Per-function rows in the store: a profile folder holding a sampled recording (`record -o
OUT/rec`) uploads its report rows; `runs show` lists them and `runs export --report` gives back
what `autoprof report --csv` printed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from autoprof.run import outdir
from autoprof.testing.cli import invoke
from autoprof.testing.synthetic_out import make_out
from tests.conftest import count


@pytest.fixture
def out_with_recording(hotspots_recording: Path, tmp_path: Path) -> Path:
    out = make_out(tmp_path / "out", runs=1, repeats=1, intervals=3)
    shutil.copytree(hotspots_recording, out / "rec")
    return out


@pytest.mark.slow
def test_function_rows_round_trip(out_with_recording: Path, store_url: str, tmp_path: Path):
    up = invoke("upload", out_with_recording, "--store", store_url)
    assert up.returncode == 0, up.output
    run_id = outdir.read_manifest(out_with_recording).id
    shown = json.loads(invoke("runs", "show", run_id, "--json", "--store", store_url).stdout)
    rec = shown["functions"]["rec"]
    assert rec["events"] == ["cpu-clock", "page-faults"]
    assert [f["symbol"] for f in rec["functions"][:3]] == ["heavy", "medium", "touch"]
    text = invoke("runs", "show", run_id, "--store", store_url).stdout
    assert "recording rec: cpu-clock" in text and "heavy" in text
    exported = invoke("runs", "export", run_id, "--report", "-o", "-", "--store", store_url)
    assert exported.returncode == 0, exported.output
    direct = invoke("report", out_with_recording / "rec", "--csv", "-")
    assert exported.stdout == direct.stdout
    target = tmp_path / "functions.csv"
    to_file = invoke("runs", "export", run_id, "--report", "-o", target, "--store", store_url)
    assert to_file.returncode == 0 and target.read_text() == direct.stdout
    assert count(store_url, "function_row") > 0
    assert invoke("runs", "delete", run_id, "--yes", "--store", store_url).returncode == 0
    assert count(store_url, "function_row") == 0


def test_a_run_without_recordings(sqlite_url: str, tmp_path: Path):
    out = make_out(tmp_path / "out", runs=1, repeats=1, intervals=3)
    assert invoke("upload", out, "--store", sqlite_url).returncode == 0
    run_id = outdir.read_manifest(out).id
    shown = json.loads(invoke("runs", "show", run_id, "--json", "--store", sqlite_url).stdout)
    assert shown["functions"] == {}
    bad = invoke("runs", "export", run_id, "--report", "-o", "-", "--store", sqlite_url)
    assert bad.returncode != 0 and "has no per-function rows" in bad.output


@pytest.mark.slow
def test_several_recordings_are_named_on_export(
    hotspots_recording: Path,
    sqlite_url: str,
    tmp_path: Path,
):
    out = make_out(tmp_path / "out", runs=1, repeats=1, intervals=3)
    for name in ("a", "b"):
        shutil.copytree(hotspots_recording, out / name)
    assert invoke("upload", out, "--store", sqlite_url).returncode == 0
    run_id = outdir.read_manifest(out).id
    both = invoke("runs", "export", run_id, "--report", "-o", "-", "--store", sqlite_url)
    assert both.returncode != 0 and "holds recordings a, b" in both.output
    chosen = ["--report", "--recording", "b", "-o", "-", "--store", sqlite_url]
    one = invoke("runs", "export", run_id, *chosen)
    assert one.returncode == 0 and one.stdout.startswith("symbol,dso,cpu-clock,")
