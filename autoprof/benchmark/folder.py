"""A benchmark kept on disk (`autoprof bench -o DIR`), laid out like a profile's out/ so that
`autoprof upload DIR` stores it and `runs export` gives its rows back:

    DIR/manifest.json   what was run (command: the commands, `--` between them), on which
                        machine; its options measure no intervals
    DIR/bench.json      the --export-json document: repetitions, summaries, ratios
    DIR/results.csv     one row per (command, repetition, metric): EVENT_NAME is the metric
                        (wall_s, user_s, sys_s or the event), RUN the command's number,
                        REPEAT the repetition, VALUE_UNIT the unit
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from autoprof import __version__
from autoprof.benchmark.measure import BenchResult
from autoprof.catalog.facts import MachineFacts
from autoprof.errors import AutoprofError
from autoprof.results import csvfile
from autoprof.run import outdir
from autoprof.run.options import ProfileOptions
from autoprof.run.outdir import Manifest
from autoprof.util import atomic
from autoprof.util.clock import now_iso
from autoprof.util.status import RowStatus


def command_words(result: BenchResult) -> list[str]:
    """All commands as one argv, `--` between them (as given to `autoprof bench`)."""
    words: list[str] = []
    for i, command in enumerate(result.commands):
        words += (["--"] if i else []) + command.command
    return words


def frame(result: BenchResult):
    """The results.csv rows of a benchmark (see the module docstring)."""
    import pandas as pd

    rows = [
        {
            "EVENT_NAME": metric,
            "INDEX": 0,
            "SAMPLE_VALUE": rep.value(metric),
            "RUN": number,
            "REPEAT": rep.index,
            "PMU": result.source(metric),
            "VALUE_UNIT": result.units.get(metric, ""),
            "PERCENT_RUNNING": 100.0,
            "STATUS": RowStatus.OK,
        }
        for number, command in enumerate(result.commands, 1)
        for rep in command.repetitions
        for metric in result.metrics
    ]
    return csvfile.normalize(pd.DataFrame(rows).reindex(columns=csvfile.COLUMNS))


def write(out: Path, result: BenchResult, facts: MachineFacts, document: dict) -> Manifest:
    """Write the benchmark folder (`document` is the JSON export); returns its manifest."""
    if (out / outdir.MANIFEST).exists():
        raise AutoprofError(f"{out} already holds a profile or benchmark; use another -o")
    out.mkdir(parents=True, exist_ok=True)
    manifest = Manifest(
        id=str(uuid.uuid4()),
        autoprof_version=__version__,
        created=now_iso(),
        command=command_words(result),
        machine=facts,
        plan={},
        options=ProfileOptions(interval_ms=None),
    )
    atomic.write(out / outdir.BENCH, json.dumps(document, indent=1) + "\n")
    csvfile.write_csv(frame(result), out / outdir.RESULTS)
    outdir.write_manifest(out, manifest)
    return manifest
