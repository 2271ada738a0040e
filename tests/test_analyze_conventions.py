"""autoperf's calling conventions: analyses take the profile folder, event-detail takes
AVG./MAX./MIN./STD. features, and correlation works on autoperf's own 4-interval results."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from autoprof.analysis import correlation, data, event_detail
from autoprof.commands.analyze import autoperf_args
from autoprof.errors import AutoprofError
from autoprof.testing.cli import process

REPO = Path(__file__).resolve().parents[1]
EVENT = "UNC_CHA_TOR_INSERTS.LOC_ALL"  # in autoperf's sample: 21 boxes x 4 intervals


@pytest.fixture
def autoperf_out(samples_dir, tmp_path) -> Path:
    """A folder laid out as autoperf leaves it: out/results.csv."""
    out = tmp_path / "out"
    out.mkdir()
    shutil.copy(samples_dir / "autoperf-results.csv", out / "results.csv")
    return out


def script(name: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO / "analyze" / f"{name}.py"), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
    )


@pytest.mark.slow  # every calling form, each a fresh interpreter
def test_autoperf_calling_forms(autoperf_out):
    """autoperf documents `correlation.py ./out`, `stats.py ./out` and `event_detail.py
    --resultdir ./out --features AVG.EVENT ...`."""
    cwd = autoperf_out.parent
    proc = script("correlation", "./out", cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    assert "--min-overlap 4 chosen from the data" in proc.stdout
    matrix = pd.read_csv(autoperf_out / "analysis" / "correlation_matrix.csv", index_col=0)
    assert len(matrix) >= 2 and matrix.notna().all().all()
    proc = script("stats", "./out", cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    assert (autoperf_out / "analysis" / "stats.csv").is_file()
    proc = script(
        "event_detail", "--resultdir", "./out", "--features", f"AVG.{EVENT}", f"MAX.{EVENT}",
        cwd=cwd,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"plotted AVG.{EVENT}, MAX.{EVENT}" in proc.stdout
    assert (autoperf_out / "analysis" / "event_detail.png").stat().st_size > 0


def test_a_results_file_still_works_and_an_explicit_overlap_is_kept(autoperf_out):
    results = str(autoperf_out / "results.csv")
    proc = process("analyze", "correlation", results, "--min-overlap", "10")
    assert proc.returncode != 0  # the user's choice is not overridden: every event is too short
    assert "fewer than 10 intervals" in proc.stderr and "Traceback" not in proc.stderr


def test_min_overlap_is_chosen_from_the_data(autoperf_out):
    frame = data.load(autoperf_out, data.SERIES_COLUMNS)
    result = correlation.analyse(frame)
    assert (result.min_overlap, result.min_overlap_chosen, result.intervals) == (4, True, 4)
    assert len(result.matrix) >= 2
    long = pd.DataFrame(index=range(40))
    assert correlation.choose_min_overlap(long) == correlation.MIN_OVERLAP
    assert correlation.choose_min_overlap(long.head(2)) == correlation.FEWEST_OVERLAP


def test_features_are_statistics_over_the_boxes(autoperf_out):
    frame = data.load(autoperf_out)
    names = [f"{p}.{EVENT}" for p in event_detail.FEATURES]
    intervals = event_detail.add_features(frame, data.per_interval(frame), names)
    raw = pd.read_csv(autoperf_out / "results.csv")
    raw = raw[raw["EVENT_NAME"] == EVENT].groupby("INDEX")["SAMPLE_VALUE"]
    for prefix, stat in event_detail.FEATURES.items():
        lines = event_detail.timelines(intervals, [f"{prefix}.{EVENT}"])
        assert lines["VALUE"].tolist() == pytest.approx(raw.agg(stat).tolist())
    assert event_detail.split_feature("MAX.NOPE", {EVENT}) == (None, "MAX.NOPE")


def test_autoperf_arguments_are_translated():
    assert autoperf_args(["--resultdir", "out", "--features", "AVG.A", "MAX.B", "--log"]) == [
        "out", "-e", "AVG.A", "-e", "MAX.B", "--log",
    ]  # fmt: skip
    assert autoperf_args(["out", "-e", "X"]) == ["out", "-e", "X"]


def test_folder_without_results_says_what_to_do(tmp_path):
    (tmp_path / "manifest.json").write_text("{}")
    with pytest.raises(AutoprofError, match="run `autoprof aggregate"):
        data.results_path(tmp_path)
    assert data.results_path(tmp_path / "x.csv") == tmp_path / "x.csv"


def test_compare_takes_two_profile_folders(autoperf_out, tmp_path, cli_run):
    other = tmp_path / "other"
    shutil.copytree(autoperf_out, other)
    proc = cli_run("analyze", "compare", autoperf_out, other)
    assert proc.returncode == 0, proc.stderr
    table = pd.read_csv(autoperf_out / "analysis" / "compare.csv")
    assert not table["significant"].any()  # the same results on both sides
