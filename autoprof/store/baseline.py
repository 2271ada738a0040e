"""Baselines of the regression gates (`analysis.gate`): read from a file or the results
store, and a benchmark kept in the store as one.

A reference is a path (a bench.json, a folder `bench -o` or `profile` wrote, a results.csv) or
`store:ID` (a stored run, by uuid or prefix) or `store:KEY=VALUE` (the newest stored run with
that tag: `--save store: --tag branch=main` on main, `--baseline store:branch=main` on a pull
request).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from autoprof.analysis import gate
from autoprof.benchmark import folder, measure
from autoprof.errors import AutoprofError
from autoprof.run import outdir

PREFIX = "store:"


def samples(
    ref: str, store_text: str | None, region: str | None = None
) -> tuple[dict[str, gate.Sample], str]:
    """The samples of the baseline `ref` (metric -> Sample) and its name for the summary; of
    one region's rows with `region` (a profile's, `profile --region`)."""
    if ref.startswith(PREFIX):
        return _stored(ref[len(PREFIX) :], store_text, region)
    path = Path(ref)
    if path.is_dir() and (path / outdir.BENCH).is_file():
        path = path / outdir.BENCH
    if not path.exists():
        raise AutoprofError(f"baseline {ref}: no such file")
    if path.suffix == ".json":
        if region is not None:
            raise AutoprofError(f"baseline {ref}: a benchmark has no regions (--region)")
        return bench_file(path), str(ref)
    from autoprof.analysis import data

    return gate.frame_samples(data.load(path, region=region)), str(ref)


def bench_file(path: Path) -> dict[str, gate.Sample]:
    """The samples of a bench.json's first command (a baseline holds one)."""
    try:
        document = json.loads(path.read_text())
        result = measure.from_json(document, path)
    except (ValueError, KeyError, TypeError) as err:
        raise AutoprofError(f"{path}: not a bench.json ({type(err).__name__}: {err})") from None
    if len(result.commands) != 1:
        raise AutoprofError(f"{path}: a baseline holds one command; it has {len(result.commands)}")
    return gate.bench_samples(result, 0)


def _stored(
    what: str, store_text: str | None, region: str | None
) -> tuple[dict[str, gate.Sample], str]:
    from autoprof.store import engine, export, queries

    store = engine.open_store(store_text, create=False)
    with store.read() as conn:
        if "=" in what:
            key, _, value = what.partition("=")
            found = queries.list_runs(
                conn, queries.RunFilter(tags={key: value}), newest_first=True, limit=1
            )
            if not found:
                raise AutoprofError(f"no stored run tagged {key}={value} in {store.shown}")
            uuid = found[0].uuid
        else:
            uuid = queries.find_run(conn, what).uuid
        frame = export.frame(conn, uuid)
    if frame.empty:
        raise AutoprofError(f"stored run {uuid} has no results")
    if frame["RUN"].nunique() > 1 and (frame["PMU"] == "time").any():
        frame = frame[frame["RUN"] == frame["RUN"].min()]  # a bench: its first command
    from autoprof.analysis import data

    frame = data.of_region(frame, region, f"stored run {uuid}")
    return gate.frame_samples(data.prepare(frame)), f"{PREFIX}{uuid}"


def save(result: measure.BenchResult, document: dict, facts, store_text, tags, out) -> str:
    """Store the benchmark (its folder `out`, or one written for it) as a run; its uuid."""
    from autoprof.store import driver, upload

    store = driver.Database.of(store_text)
    with tempfile.TemporaryDirectory(prefix="autoprof-baseline-") as tmp:
        if out is None:
            out = Path(tmp) / "bench"
            folder.write(out, result, facts, document)
        done = upload.upload(store, out, tags)
    return done.uuid
