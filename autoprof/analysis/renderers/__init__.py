"""Renderers of the analyses' results, one module per output format (pyinstrument's
`renderers/`), chosen by the output's extension: `-o heat.png` draws the figure, `-o table.csv`
writes the main table, `-o tables.txt` the terminal's tables; a folder (or no `-o`) gets every
default output. `-o -` puts the main table on standard output as CSV, `-o -.txt` the tables as
text (the CLI's `-` for standard output, its extension picking the format as a file's does); a
figure is no output for a pipe and is refused. Importing this package imports neither Matplotlib
nor a renderer."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING

from autoprof.errors import AutoprofError
from autoprof.util.renderer import STDOUT

if TYPE_CHECKING:
    from rich.console import Console

    from autoprof.analysis.tables import Result
    from autoprof.util.renderer import Renderer

RENDERERS = {  # extension -> module:class, imported when chosen (png imports Matplotlib)
    ".png": "png:PngRenderer",
    ".svg": "png:SvgRenderer",
    ".csv": "csv:CsvRenderer",
    ".txt": "console:ConsoleRenderer",
}


def renderer(target: str) -> Renderer[Result]:
    """A renderer from its `module:class` in RENDERERS, importing only that module."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)()


FIGURE_EXTENSIONS = (".png", ".svg")


def stdout_format(out: Path | None) -> str | None:
    """The extension standard output is asked for: `-` the main table (.csv), `-.csv` the
    same, `-.txt` the terminal's tables; None when `out` is no standard output."""
    if out is None or out.parent != Path(".") or out.stem != STDOUT:
        return None
    return out.suffix.lower() or ".csv"


def is_folder(out: Path) -> bool:
    """An output without an extension (or an existing folder) is a folder for every output."""
    return stdout_format(out) is None and (out.is_dir() or not out.suffix)


def check(out: Path | None) -> Path | None:
    """`out` when it is a folder, None, standard output for a table or a file of a known
    extension; else one line that says what is (checked before any work)."""
    if out is None or is_folder(out):
        return out
    suffix = stdout_format(out) or out.suffix.lower()
    if suffix not in RENDERERS:
        known = ", ".join(RENDERERS)
        raise AutoprofError(f"{out}: unknown output format {out.suffix!r} (known: {known})")
    if suffix in FIGURE_EXTENSIONS and stdout_format(out) is not None:
        raise AutoprofError(
            f"{out}: a figure is not written to standard output (-o - writes the main table as "
            "CSV, -o -.txt the tables as text; a figure needs a file, e.g. -o figure.png)"
        )
    return out


def for_path(out: Path) -> Renderer[Result]:
    """The renderer of a file's extension."""
    check(out)
    return renderer(RENDERERS[out.suffix.lower()])


def render(result: Result, out: Path | None, folder: Path, console: Console) -> list[Path]:
    """Write `result` to `out` by its extension (standard output: `stdout_format`); with no
    `out` or a folder, the terminal's tables to `console` and every default file (figures, then
    tables) into `out` or `folder` (`util.renderer.write` writes each). The files written."""
    from autoprof.util.renderer import write

    suffix = stdout_format(check(out))
    if suffix is not None:
        write(renderer(RENDERERS[suffix]).render(result), STDOUT)
        return []
    if out is not None and not is_folder(out):
        chosen = for_path(out)
        if out.suffix.lower() in FIGURE_EXTENSIONS and not result.FIGURES:
            name = type(result).__name__.lower()
            raise AutoprofError(f"{out}: {name} draws no figure (use .csv or .txt)")
        out.parent.mkdir(parents=True, exist_ok=True)
        write(chosen.render(result), out)
        return [out]
    from autoprof.analysis.renderers.console import ConsoleRenderer
    from autoprof.analysis.renderers.csv import table_csv

    folder = out if out is not None else folder
    folder.mkdir(parents=True, exist_ok=True)
    files: list[tuple[str, str | bytes]] = []
    if result.FIGURES:
        from autoprof.analysis.renderers.png import figure_files

        files += figure_files(result)
    files += [(f"{table.name}.csv", table_csv(table)) for table in result.tables()]
    written = [folder / name for name, _ in files]
    for path, (_, data) in zip(written, files, strict=True):
        write(data, path)
    write(ConsoleRenderer(console).render(result), None)
    return written
