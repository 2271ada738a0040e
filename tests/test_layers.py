"""The layers hold: every `autoprof.*` import (at module level or inside a function) goes to
the importer's own layer or a lower one, no two top-level units import each other in a circle,
and the benchmarks import nothing from the tests.

Read from the source with `ast`, so nothing is imported and a lazy import inside a function
counts as much as one at the top.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from pathlib import Path

import networkx as nx

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "autoprof"

DESIGN = REPO / "docs" / "DESIGN.md"


def design_layers() -> list[set[str]]:
    """The units of each layer, low to high, from the table under "## Layers" in docs/DESIGN.md:
    the document and this test hold one list, so they cannot drift apart."""
    section = DESIGN.read_text().split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|") for line in section.splitlines() if line.startswith("| ")]
    layers = [(int(cells[1]), set(re.findall(r"`([\w_]+)`", cells[2]))) for cells in rows[1:]]
    assert [rank for rank, _ in layers] == list(range(1, len(layers) + 1)), "layers numbered 1..N"
    named = [unit for _, units in layers for unit in units]
    assert len(named) == len(set(named)), "a unit in two layers"
    return [units for _, units in layers]


# Low to high: "autoprof" is the package's own __init__ (__version__).
LAYERS = design_layers()
LAYER = {unit: rank for rank, units in enumerate(LAYERS) for unit in units}


@dataclass(frozen=True)
class Import:
    source: str  # importing module, dotted
    target: str  # imported module, dotted (a name imported from a package counts as its module)
    line: int

    def unit(self, module: str) -> str:
        parts = module.split(".")
        return parts[1] if len(parts) > 1 else parts[0]

    @property
    def units(self) -> tuple[str, str]:
        return self.unit(self.source), self.unit(self.target)

    def __str__(self) -> str:
        return f"{self.source}:{self.line} imports {self.target}"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(dotted: str) -> bool:
    path = REPO.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imports(path: Path) -> list[Import]:
    """Every `autoprof` import in `path`, wherever it stands (relative ones resolved)."""
    source = _module_name(path)
    package = source if path.name == "__init__.py" else source.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [Import(source, a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            module = ".".join([*base, node.module] if node.module else base)
            module = module if node.level else node.module or ""
            for alias in node.names:  # `from autoprof import outdir` imports autoprof.run.outdir
                sub = f"{module}.{alias.name}"
                found.append(Import(source, sub if _is_module(sub) else module, node.lineno))
    return list(dict.fromkeys(i for i in found if i.target.split(".")[0] == "autoprof"))


@functools.cache
def all_imports() -> list[Import]:
    return [i for path in sorted(PACKAGE.rglob("*.py")) for i in imports(path)]


def test_every_unit_has_a_layer():
    """A new top-level module or package is placed in LAYERS on purpose, not by accident."""
    units = {p.stem for p in PACKAGE.glob("*.py")} | {
        p.parent.name for p in PACKAGE.glob("*/__init__.py")
    }
    units = {"autoprof" if u == "__init__" else u for u in units}
    assert sorted(units - LAYER.keys()) == []


def test_only_the_cli_and_errors_stand_at_the_top():
    """Every other module lives in the package of its layer (util/, run/, results/, ...)."""
    top = {p.name for p in PACKAGE.glob("*.py")}
    assert sorted(top - {"__init__.py", "__main__.py", "cli.py", "errors.py"}) == []


def test_imports_go_down_the_layers():
    upward = [
        f"{i} (layer {LAYER[i.units[0]]} -> {LAYER[i.units[1]]})"
        for i in all_imports()
        if LAYER.get(i.units[1], -1) > LAYER.get(i.units[0], -1)
    ]
    assert not upward, "imports from a lower layer to a higher one:\n" + "\n".join(upward)


def _circles(edges: dict[tuple[str, str], Import]) -> list[str]:
    """Every circle of the graph `edges` draws, each with the import that makes each step."""
    graph = nx.DiGraph(list(edges))
    return [
        " -> ".join([*cycle, cycle[0]])
        + ": "
        + "; ".join(str(edges[(a, b)]) for a, b in zip(cycle, [*cycle[1:], cycle[0]], strict=True))
        for cycle in sorted(nx.simple_cycles(graph), key=sorted)
    ]


def test_no_circle_between_units():
    where: dict[tuple[str, str], Import] = {}
    for i in all_imports():
        a, b = i.units
        if a != b:
            where.setdefault((a, b), i)
    circles = _circles(where)
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_no_circle_between_modules():
    """Inside a unit too: two modules that need each other are one concept split badly (a
    type-only import under TYPE_CHECKING counts: a Protocol, or a third module, breaks it)."""
    where: dict[tuple[str, str], Import] = {}
    for i in all_imports():
        if i.source != i.target:
            where.setdefault((i.source, i.target), i)
    circles = _circles(where)
    assert not circles, "import circles between modules:\n" + "\n".join(circles)


def test_commands_share_only_common():
    """One module per command (asv's commands/): what two commands share lives in
    commands/common.py or the library, never in another command's module."""
    crossing = [
        str(i)
        for i in all_imports()
        if i.source.startswith("autoprof.commands.")
        and i.target.startswith("autoprof.commands.")
        and i.target.split(".")[2] not in ("common", i.source.split(".")[2])
    ]
    assert not crossing, "a command importing another command:\n" + "\n".join(crossing)


def test_the_layer_walk_sees_lazy_and_package_imports():
    """The walk itself: an import inside a function and `from autoprof import x` both count."""
    probe = PACKAGE / "commands" / "worker.py"
    targets = {i.target for i in imports(probe)}
    assert "autoprof.queue.worker" in targets  # imported inside the command function
    assert "autoprof.util.xdg" in targets  # `from autoprof import urls, xdg`


def test_benchmarks_import_nothing_from_the_tests():
    """bench/ scripts run outside pytest: what they share with the tests lives in the library
    (autoprof.testing), not in tests/."""
    test_modules = {p.stem for p in (REPO / "tests").glob("*.py")} | {"tests", "conftest"}
    found = []
    for path in sorted((REPO / "bench").glob("*.py")):
        text = path.read_text()
        for node in ast.walk(ast.parse(text, str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            found += [
                f"{path.name}:{node.lineno} imports {n}"
                for n in names
                if n.split(".")[0] in test_modules
            ]
        found += [
            f"{path.name}:{n} puts tests/ on sys.path"
            for n, line in enumerate(text.splitlines(), 1)
            if "sys.path" in line and "tests" in line
        ]
    assert not found, "bench/ using tests/:\n" + "\n".join(found)
