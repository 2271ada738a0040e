"""`perf script` samples -> gprof2dot -> Graphviz `dot`: a call graph coloured by total time.

gprof2dot reads perf script text itself, but it counts every sample as 1 and mixes all events
into one graph; fed FlameGraph's folded stacks (its `collapse` format) instead, it shows one
event weighted by the sample periods, so its percentages are `report`'s. Node labels: total
share (the function and its callees), then self share in parentheses.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from autoprof.errors import AutoprofError
from autoprof.flame.fold import Folded, folded_lines
from autoprof.util import children

FORMATS = ("svg", "png", "dot")


@dataclass(frozen=True)
class GraphOptions:
    node_thres: float = 0.5  # hide functions below this share of the total (percent)
    edge_thres: float = 0.1  # hide calls below this share (percent)
    root: str | None = None  # only what this function calls
    leaf: str | None = None  # only the callers of this function


def output_format(path: Path) -> str:
    fmt = path.suffix.lstrip(".").lower()
    if fmt not in FORMATS:
        raise AutoprofError(f"{path}: give a .svg, .png or .dot file name")
    return fmt


def gprof2dot_argv(options: GraphOptions) -> list[str]:
    """gprof2dot reading folded stacks on standard input, writing dot on standard output."""
    argv = children.python_argv("gprof2dot", "-f", "collapse")
    argv += ["-n", str(options.node_thres), "-e", str(options.edge_thres)]
    if options.root:
        argv += ["-z", options.root]
    if options.leaf:
        argv += ["-l", options.leaf]
    return argv


def dot_argv(fmt: str, output: Path) -> list[str]:
    return ["dot", f"-T{fmt}", "-o", str(output)]


def to_dot(folded: Folded, options: GraphOptions) -> str:
    """The call graph of `folded` in Graphviz's language."""
    text = "".join(folded_lines(folded))
    done = subprocess.run(
        gprof2dot_argv(options),
        input=text,
        capture_output=True,
        text=True,
        errors="replace",
        cwd=children.SAFE_CWD,
        env=children.plain_env(),
    )
    if done.returncode != 0:
        if "No module named gprof2dot" in done.stderr:
            raise AutoprofError("gprof2dot is not installed (pip install gprof2dot)")
        last = done.stderr.strip().splitlines()[-1:] or ["no message"]
        raise AutoprofError(f"gprof2dot failed: {last[0]}")
    if "->" not in done.stdout and "label=" not in done.stdout:
        raise AutoprofError("the call graph is empty (lower --node-thres, check --root/--leaf)")
    return done.stdout


def write(folded: Folded, output: Path, options: GraphOptions) -> None:
    """Draw the call graph of `folded` into `output` (.svg, .png or .dot)."""
    fmt = output_format(output)
    dot = to_dot(folded, options)
    if fmt == "dot":
        output.write_text(dot)
        return
    if shutil.which("dot") is None:
        raise AutoprofError("Graphviz's dot not found (Debian: sudo apt-get install graphviz)")
    done = subprocess.run(dot_argv(fmt, output), input=dot, capture_output=True, text=True)
    if done.returncode != 0:
        raise AutoprofError(f"dot failed: {done.stderr.strip() or done.returncode}")
