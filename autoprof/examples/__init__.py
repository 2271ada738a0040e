"""The bundled example workload (`writes.c`) and how to build it: `make demo` profiles it,
and the end-to-end tests use it because hardware breakpoints count its writes exactly."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from autoprof.errors import AutoprofError

SOURCE = Path(__file__).with_name("writes.c")
SLOTS = 12


def build_writes(dest_dir: Path, slot0_factor: int = 1) -> Path:
    """Compile writes.c into `dest_dir` (cc -O1 -no-pie) and return the binary's path. With
    `slot0_factor`, slot 0 is written that many times as often: a second build of the same
    program, with the same slot addresses, for comparisons."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise AutoprofError("no C compiler (cc) to build the example (apt-get install gcc)")
    dest_dir.mkdir(parents=True, exist_ok=True)
    binary = dest_dir / "writes"
    flags = ["-O1", "-no-pie", f"-DSLOT0_FACTOR={slot0_factor}"]
    proc = subprocess.run(
        [cc, *flags, "-o", str(binary), str(SOURCE)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise AutoprofError(f"cc failed to build {SOURCE.name}: {proc.stderr.strip()}")
    return binary


def slot_addresses(binary: Path) -> list[str]:
    """The 12 slot addresses of a built `writes` (fixed: it is not position-independent)."""
    out = subprocess.run([str(binary), "--addresses"], capture_output=True, text=True, check=True)
    return out.stdout.split()


def expected_writes(n: int, slot0_factor: int = 1) -> list[int]:
    """How many times `writes N` (built with `slot0_factor`) writes each slot."""
    return [n * (i + 1) * (slot0_factor if i == 0 else 1) for i in range(SLOTS)]
