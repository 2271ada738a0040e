"""The bundled example workloads and how to build them: `writes.c` (`make demo` profiles it,
and the end-to-end tests use it because hardware breakpoints count its writes exactly),
`hotspots.c` (three functions of known cost, for record / report / callgraph) and `heap.c`
(known allocations, for memory), `calls.c` (a small call tree, for instruction traces),
`regions.c` (writes inside and outside named regions, for `profile --region`) and `threads.c`
(two threads, each writing its own slot: profile --per-thread)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from autoprof.errors import AutoprofError

SOURCE = Path(__file__).with_name("writes.c")
SLOTS = 12


def build_example(name: str, dest_dir: Path, flags: list[str]) -> Path:
    """Compile the example `name` (name.c beside this file) into `dest_dir`; the binary's path."""
    source = SOURCE.with_name(f"{name}.c")
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise AutoprofError("no C compiler (cc) to build the example (apt-get install gcc)")
    dest_dir.mkdir(parents=True, exist_ok=True)
    binary = dest_dir / name
    proc = subprocess.run(
        [cc, *flags, "-o", str(binary), str(source)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise AutoprofError(f"cc failed to build {source.name}: {proc.stderr.strip()}")
    return binary


def build_writes(dest_dir: Path, slot0_factor: int = 1) -> Path:
    """Compile writes.c into `dest_dir` (cc -O1 -no-pie) and return the binary's path. With
    `slot0_factor`, slot 0 is written that many times as often: a second build of the same
    program, with the same slot addresses, for comparisons."""
    return build_example("writes", dest_dir, ["-O1", "-no-pie", f"-DSLOT0_FACTOR={slot0_factor}"])


def build_hotspots(dest_dir: Path) -> Path:
    """hotspots.c with frame pointers and debug lines (perf -g stacks, addr2line)."""
    return build_example("hotspots", dest_dir, ["-O2", "-g", "-fno-omit-frame-pointer"])


def slot_addresses(binary: Path) -> list[str]:
    """The slot addresses of a built `writes` (12) or `threads` (2): fixed, as neither is
    position-independent."""
    out = subprocess.run([str(binary), "--addresses"], capture_output=True, text=True, check=True)
    return out.stdout.split()


def expected_writes(n: int, slot0_factor: int = 1) -> list[int]:
    """How many times `writes N` (built with `slot0_factor`) writes each slot."""
    return [n * (i + 1) * (slot0_factor if i == 0 else 1) for i in range(SLOTS)]


def build_heap(dest_dir: Path) -> Path:
    """heap.c with debug lines, so massif names its allocation sites by file:line."""
    return build_example("heap", dest_dir, ["-O1", "-g"])


def build_regions(dest_dir: Path) -> Path:
    """regions.c against autoprof.h (the markers' folder on the include path), at a fixed
    address (-no-pie): breakpoints count its slot's writes per region."""
    import autoprof.markers

    include = Path(autoprof.markers.__file__).resolve().parent
    return build_example("regions", dest_dir, ["-O1", "-no-pie", f"-I{include}"])


def region_slot(binary: Path) -> str:
    """The address of the slot a built `regions` writes."""
    out = subprocess.run([str(binary), "--address"], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def build_calls(dest_dir: Path) -> Path:
    """calls.c, statically linked at fixed addresses: a whole program in one ELF, so a trace's
    every address has a symbol (no loader, no shared libraries to map)."""
    return build_example("calls", dest_dir, ["-O1", "-g", "-static", "-no-pie"])


def build_threads(dest_dir: Path) -> Path:
    """threads.c (cc -O1 -no-pie -pthread): its slot addresses are fixed (`slot_addresses`)."""
    return build_example("threads", dest_dir, ["-O1", "-no-pie", "-pthread"])
