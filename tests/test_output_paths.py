"""An output path the user gives (`commands.common.existing_parent`, the SQLite store's file):
a typo'd parent folder is one line, never a tree of folders made silently (#41); a folder given
to `runs export -o` gets the file by its usual name."""

from __future__ import annotations

import shutil

import pytest

from autoprof.run import outdir
from autoprof.testing.cli import invoke, one_error_line
from autoprof.testing.synthetic_out import make_out
from tests.helpers import PROFILE


@pytest.mark.parametrize(
    "args",
    [
        ["profile", "-e", "task-clock", "-o", "{missing}/out", "--", "true"],
        ["record", "-o", "{missing}/rec", "--", "true"],
        ["memory", "-o", "{missing}/mem", "--", "true"],
        ["bench", "-n", "2", "--export-json", "{missing}/b.json", "--", "true"],
        ["runs", "export", "x", "-o", "{missing}/r.csv"],
        ["callgraph", "rec", "-o", "{missing}/g.svg"],
        ["demo", "-o", "{missing}/demo"],
    ],
)
def test_a_typod_parent_folder_is_one_line_and_made_nowhere(tmp_path, args):
    missing = tmp_path / "no" / "such"
    given = [a.format(missing=missing) for a in args]
    one_error_line(invoke(*given), f"no folder {missing}", "a typo?")
    assert not (tmp_path / "no").exists()


def test_a_store_in_a_missing_folder_is_one_line(tmp_path):
    out = make_out(tmp_path / "out", runs=1, repeats=1, intervals=2)
    store = tmp_path / "no" / "x.db"
    one_error_line(invoke("upload", out, "--store", store), f"no store at {store} and no folder")
    assert not store.parent.exists()
    assert invoke("upload", out, "--store", tmp_path / "x.db").returncode == 0


def test_runs_export_into_a_folder_writes_results_csv_there(tmp_path):
    out = make_out(tmp_path / "out", runs=1, repeats=1, intervals=2)
    store = tmp_path / "x.db"
    assert invoke("upload", out, "--store", store).returncode == 0
    run_id = outdir.read_manifest(out).id
    folder = tmp_path / "exported"
    folder.mkdir()
    done = invoke("runs", "export", run_id, "-o", folder, "--store", store)
    assert done.returncode == 0, done.stderr
    assert done.stderr.endswith(f" rows to {folder / 'results.csv'}\n")
    assert ".tmp" not in done.stderr and (folder / "results.csv").is_file()


def test_aggregate_to_a_path_that_cannot_be_written_names_that_path(cli_run, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(PROFILE, out)
    target = tmp_path / "no-such-folder" / "results.csv"
    line = one_error_line(cli_run("aggregate", out, "-o", target))
    assert f"{target}: No such file or directory" in line and ".partial" not in line


@pytest.mark.needs_perf
def test_a_bad_output_folder_fails_before_the_profiling_banner(cli_run, tmp_path):
    (tmp_path / "file").write_text("")
    line = one_error_line(cli_run("profile", "-e", "task-clock", "-o", tmp_path / "file" / "o",
                                  "--", "true"))  # fmt: skip
    assert f"{tmp_path / 'file'}: Not a directory" in line
    first = tmp_path / "first"
    assert cli_run("profile", "-e", "task-clock", "-o", first, "--", "true").returncode == 0
    again = one_error_line(cli_run("profile", "-e", "task-clock", "-o", first, "--", "ls"))
    assert "holds a profile of another command" in again
