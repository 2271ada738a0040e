"""`bench`'s options for CI's regression gates (`BaselineOptions`, `GateOptions`), each
declared once (autoprof.util.declared): the command line, a job spec and a page derive them
from here (`--emulate` is `profile`'s too: `run.options.ProfileOptions` declares it).
`--fail-if` and `--tag` repeat, which a declared field cannot: the commands declare those two
themselves."""

from __future__ import annotations

from dataclasses import dataclass

from autoprof.util.declared import Declared, declare


@dataclass(frozen=True)
class BaselineOptions(Declared):
    """`bench`'s: where its baseline goes and comes from."""

    save: str | None = declare(
        None,
        flags=("--save",),
        metavar="FILE|store:",
        help="Write the benchmark as a baseline: a bench.json file, or store: for the results "
        "store (--store, --tag).",
    )
    baseline: str | None = declare(
        None,
        flags=("--baseline",),
        metavar="FILE|store:ID|store:KEY=VALUE",
        help="Compare with this baseline (a bench.json, a bench or profile folder, a "
        "results.csv, a stored run, or the newest stored run with that tag); needs --fail-if.",
    )


@dataclass(frozen=True)
class GateOptions(Declared):
    """How the gates report and decide (`bench --baseline`, `analyze compare --fail-if`)."""

    summary: str | None = declare(
        None,
        flags=("--summary",),
        metavar="FILE",
        help="Append the gates' Markdown table to FILE (e.g. $GITHUB_STEP_SUMMARY); - prints it.",
    )
    summary_json: str | None = declare(
        None, flags=("--summary-json",), metavar="FILE", help="Write the gates' verdicts as JSON."
    )
    confidence: float = declare(
        0.95,
        flags=("--confidence",),
        low=0.5,
        high=0.999,
        help="Confidence of the intervals a noisy metric's gate must clear.",
    )
