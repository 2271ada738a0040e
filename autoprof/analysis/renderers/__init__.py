"""Renderers of the analyses' results, one module per output format (pyinstrument's
`renderers/`), chosen by the output's extension: `-o heat.png` draws the figure, `-o table.csv`
writes the main table, `-o tables.txt` the terminal's tables; a folder (or no `-o`) gets every
default output. Importing this package imports neither Matplotlib nor a renderer."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING

from autoprof.errors import AutoprofError

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


def is_folder(out: Path) -> bool:
    """An output without an extension (or an existing folder) is a folder for every output."""
    return out.is_dir() or not out.suffix


def check(out: Path | None) -> Path | None:
    """`out` when it is a folder, None or a file of a known extension; else one line naming the
    known ones (checked before any work)."""
    if out is not None and not is_folder(out) and out.suffix.lower() not in RENDERERS:
        known = ", ".join(RENDERERS)
        raise AutoprofError(f"{out}: unknown output format {out.suffix!r} (known: {known})")
    return out


def for_path(out: Path) -> Renderer[Result]:
    """The renderer of a file's extension."""
    check(out)
    return renderer(RENDERERS[out.suffix.lower()])


def render(result: Result, out: Path | None, folder: Path, console: Console) -> list[Path]:
    """Write `result` to `out` by its extension; with no `out` or a folder, the terminal's
    tables to `console` and every default file (figures, then tables) into `out` or `folder`
    (`util.renderer.write` writes each)."""
    from autoprof.util.renderer import write

    if out is not None and not is_folder(out):
        chosen = for_path(out)
        if out.suffix.lower() in (".png", ".svg") and not result.FIGURES:
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
