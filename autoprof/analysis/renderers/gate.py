"""The gates' verdicts drawn: a Markdown table in the shape of GitHub's job summary
(`$GITHUB_STEP_SUMMARY`: one row per gate, with baseline, now, change, interval and verdict),
and the same table as plain text for the terminal and CI logs."""

from __future__ import annotations

import math
from typing import ClassVar

from autoprof.analysis.gate import GateReport, Verdict
from autoprof.util.renderer import Renderer

HEADER = ("gate", "baseline", "now", "change", "interval", "verdict")


def _number(value: float, unit: str) -> str:
    if math.isnan(value):
        return "-"
    text = f"{value:,.0f}" if abs(value) >= 1000 or value == int(value) else f"{value:.4g}"
    return f"{text} {unit}".strip()


def _percent(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:+.2%}"


def row(verdict: Verdict, report: GateReport) -> tuple[str, ...]:
    """One gate's cells (see HEADER)."""
    if verdict.exact:
        interval = "exact (emulated)" if verdict.emulated else "exact (no spread)"
    elif math.isnan(verdict.low):
        interval = "-"
    else:
        level = f"{report.confidence * 100:g}%"
        interval = f"{_percent(verdict.low)} .. {_percent(verdict.high)} ({level})"
    state = "**FAIL**" if verdict.failed else "pass"
    return (
        verdict.gate,
        _number(verdict.baseline, verdict.unit),
        _number(verdict.now, verdict.unit),
        _percent(verdict.change),
        interval,
        state + (f": {verdict.note}" if verdict.note else ""),
    )


class MarkdownSummary(Renderer[GateReport]):
    extensions: ClassVar[tuple[str, ...]] = (".md",)

    def render(self, data: GateReport) -> str:
        failed = [v for v in data.verdicts if v.failed]
        title = (
            f"### autoprof: {len(failed)} of {len(data.verdicts)} gates failed"
            if failed
            else f"### autoprof: all {len(data.verdicts)} gates hold"
        )
        lines = [title, "", f"Baseline `{data.baseline}`, now `{data.now}`.", ""]
        lines += ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
        for verdict in data.verdicts:
            cells = [c.replace("|", "\\|") for c in row(verdict, data)]
            cells[0] = f"`{cells[0]}`"
            lines.append("| " + " | ".join(cells) + " |")
        lines += [""] + [f"- {note}" for note in data.notes]
        return "\n".join(lines).rstrip() + "\n"


class TextSummary(Renderer[GateReport]):
    """The table as aligned plain text (a CI log has no Markdown)."""

    extensions: ClassVar[tuple[str, ...]] = (".txt",)

    def render(self, data: GateReport) -> str:
        rows = [HEADER, *(row(v, data) for v in data.verdicts)]
        rows = [tuple(c.replace("**", "") for c in r) for r in rows]
        widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER))]
        return "".join(
            "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n"
            for r in rows
        )
