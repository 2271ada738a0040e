"""Does perf alone count the bundled example right on this machine?

Hardware breakpoints (``mem:ADDR:w``) count writes exactly on bare metal, but some VMs lose
hits (the hypervisor does not forward every debug exception). Before anything that relies on
exact breakpoint counts (`autoprof demo`, the exact-count tests), one plain
``perf stat -e mem:A:w ...`` of the example, with no autoprof in between, says whether perf
itself is right here: when it is not, autoprof cannot be, and the caller says so in one line.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from autoprof.examples import expected_writes, slot_addresses
from autoprof.perf import stat_csv
from autoprof.perf.command import perf_path, stat_argv

DEBUG_REGISTERS = 4  # x86: every breakpoint of one run at once


def breakpoint_miscount(binary: Path, writes: int = 2000) -> str | None:
    """Why perf alone miscounts `writes N` (the built example) here, in one line; None when
    its counts of the first slots (one per debug register) equal the writes made."""
    addresses = slot_addresses(binary)[:DEBUG_REGISTERS]
    events = [f"mem:{a}:w" for a in addresses]
    want = expected_writes(writes)[:DEBUG_REGISTERS]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "stat.csv"
        argv = stat_argv(events, [str(binary), str(writes)], str(out), interval_ms=None)
        argv[0] = perf_path()
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        text = out.read_bytes() if out.exists() else b""
    if proc.returncode != 0 or not text.strip():
        return f"perf stat of the example failed: {(proc.stderr.strip() or 'no output')[-200:]}"
    frame = stat_csv.parse(text, ",", interval=False).frame
    got = [frame.loc[frame["EVENT"] == e, "VALUE"].sum() for e in events]
    if got == want:
        return None
    pairs = ", ".join(f"{e} {g:.0f} of {w}" for e, g, w in zip(events, got, want, strict=True))
    return f"perf alone miscounts hardware breakpoints on this machine ({pairs})"
