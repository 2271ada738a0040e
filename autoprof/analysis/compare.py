"""What changed between two results (A and B, e.g. two builds of one program): per event the
totals, the ratio B/A, and a significance test across repetitions, sorted by effect.

Each (run, repeat) is one execution of the program, so an event's samples on a side are its
totals per (run, repeat): `profile --repeat 3` gives 3 samples per event and side (more for an
event measured in several runs). p-values are corrected for testing hundreds of events at once
(Benjamini-Hochberg false discovery rate); `significant` means q < alpha. A count that is the
same in every repetition on both sides yet differs between them (exact counts such as hardware
breakpoints) has no variance to test: it is reported as an exact change.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from autoprof.analysis import data
from autoprof.analysis.choices import COMPARE_TESTS as TESTS
from autoprof.analysis.tables import Table
from autoprof.errors import AutoprofError

SHOWN = ["total_a", "total_b", "ratio", "p_value", "q_value", "significant", "note"]
COLUMNS = [
    "event",
    "total_a",
    "total_b",
    "ratio",
    "log2_ratio",
    "n_a",
    "n_b",
    "p_value",
    "q_value",
    "significant",
    "note",
]


@dataclass
class Comparison:
    """`compare`'s table for results `a` and `b` (their names, for titles), the test and alpha
    it used and how many of the largest changes to show (`top`)."""

    table: pd.DataFrame
    a: str = "A"
    b: str = "B"
    test: str = "welch"
    alpha: float = 0.05
    top: int = 20

    FIGURES: ClassVar[tuple[str, ...]] = ("compare.png",)

    def tables(self) -> list[Table]:
        return [Table("compare", self.table)]

    def shown(self) -> list[Table]:
        shown = self.table.head(self.top).set_index("event")[SHOWN]
        title = f"Largest changes, B = {self.b} vs A = {self.a}"
        return [Table("compare", shown, title, "event")]

    def notes(self) -> list[str]:
        significant = int(self.table["significant"].sum())
        return [
            f"{significant} of {len(self.table)} events changed significantly "
            f"(q < {self.alpha}, {self.test})"
        ]


def check_same_cpu(path_a: Path, path_b: Path) -> list[str]:
    """Refuse results measured on different CPUs (event names and meanings differ between
    models); return warnings when a manifest is missing and the check cannot be made."""
    manifest_a, manifest_b = (data.read_manifest_beside(p) for p in (path_a, path_b))
    if manifest_a is None or manifest_b is None:
        return [
            f"no manifest.json beside {p}: cannot check that both results come from the same CPU"
            for p, m in ((path_a, manifest_a), (path_b, manifest_b))
            if m is None
        ]
    cpu_a = manifest_a.machine.cpu_id
    cpu_b = manifest_b.machine.cpu_id
    if cpu_a != cpu_b:
        raise AutoprofError(
            f"refusing to compare results from different CPUs: {path_a} is from {cpu_a}, "
            f"{path_b} from {cpu_b}"
        )
    return []


def significance(a: np.ndarray, b: np.ndarray, test: str = "welch") -> tuple[float, str]:
    """p-value of the difference between two samples, and a note when there is none to give
    (also `autoprof bench`'s test between two commands)."""
    if len(a) < 2 or len(b) < 2:
        return np.nan, "no test: < 2 repeats on a side"
    if np.ptp(a) == 0 and np.ptp(b) == 0:
        if a[0] == b[0]:
            return np.nan, "same in every repeat"
        return np.nan, "exact change (no variance)"
    from scipy import stats  # here, not at the top: the web app imports this module (0.3 s)

    with warnings.catch_warnings():  # nearly identical samples: scipy warns, the p is still ~1
        warnings.simplefilter("ignore", RuntimeWarning)
        if test == "welch":
            return float(stats.ttest_ind(a, b, equal_var=False).pvalue), ""
        if test == "paired":  # a[k] and b[k] measured together (bench's interleaved commands)
            return float(stats.ttest_rel(a, b).pvalue), ""
        return float(stats.mannwhitneyu(a, b, alternative="two-sided").pvalue), ""


def compare(
    frame_a: pd.DataFrame, frame_b: pd.DataFrame, test: str = "welch", alpha: float = 0.05
) -> pd.DataFrame:
    """One row per event (see COLUMNS), the largest changes first: by |log2 ratio|, events that
    appear or vanish (ratio inf or 0) on top, events on one side only at the end."""
    if test not in TESTS:
        raise AutoprofError(f"unknown test {test!r} (choose {', '.join(TESTS)})")
    samples = []
    for frame in (frame_a, frame_b):
        totals = data.run_totals(data.per_interval(frame)).dropna(subset=["TOTAL"])
        totals[data.EVENT] = totals[data.EVENT].astype(str)
        samples.append(totals.groupby(data.EVENT)["TOTAL"].apply(np.asarray).to_dict())
    rows = []
    for event in sorted(set(samples[0]) | set(samples[1])):
        a, b = samples[0].get(event), samples[1].get(event)
        if a is None or b is None:
            side = "A" if b is None else "B"
            rows.append({"event": event, "note": f"only in {side}", "significant": False})
            continue
        mean_a, mean_b = float(a.mean()), float(b.mean())
        p, note = significance(a, b, test)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = mean_b / mean_a if mean_a != 0 else (np.inf if mean_b != 0 else np.nan)
            log2_ratio = np.log2(ratio)
        rows.append(
            {
                "event": event,
                "total_a": mean_a,
                "total_b": mean_b,
                "ratio": ratio,
                "log2_ratio": log2_ratio,
                "n_a": len(a),
                "n_b": len(b),
                "p_value": p,
                "note": note or ("zero on both sides" if ratio != ratio else ""),
                "significant": note.startswith("exact change"),
            }
        )
    table = pd.DataFrame(rows).reindex(columns=COLUMNS)
    tested = table["p_value"].notna()
    if tested.any():
        from scipy import stats

        table.loc[tested, "q_value"] = stats.false_discovery_control(table.loc[tested, "p_value"])
    table["significant"] = table["significant"].astype(bool) | (table["q_value"] < alpha)
    table[["n_a", "n_b"]] = table[["n_a", "n_b"]].astype("Int64")
    effect = table["log2_ratio"].abs().fillna(-1.0)
    order = np.lexsort((table["p_value"].fillna(2.0).to_numpy(), -effect.to_numpy()))
    return table.iloc[order].reset_index(drop=True)


def analyse(
    frame_a: pd.DataFrame,
    frame_b: pd.DataFrame,
    test: str = "welch",
    alpha: float = 0.05,
    top: int = 20,
    names: tuple[str, str] = ("A", "B"),
) -> Comparison:
    """`compare` as a result for the renderers; refused when no event has a count on both
    sides (there is no change to show)."""
    table = compare(frame_a, frame_b, test, alpha)
    if table["log2_ratio"].notna().sum() == 0:
        raise AutoprofError("no event is in both results with a count: nothing to plot")
    return Comparison(table, *names, test=test, alpha=alpha, top=top)
