"""`autoprof events update --from DIR`: newer vendor data in the user's cache, where
`host.events_dir` looks before the data autoprof ships (``~/.cache/autoprof/events/<vendor>``).

DIR is a vendor data directory (an Intel perfmon checkout, perf's ``arch/x86`` or
``arch/arm64`` folder: its mapfile says which) or a Linux checkout, whose
``tools/perf/pmu-events/arch`` gives the AMD data (the AuthenticAMD rows of the x86 mapfile
and the ``amdzen*`` folders) and the Arm64 data. The copy is staged beside its final place,
every model of it parsed, and only then renamed into place: a copy that does not parse leaves
the old data as it was, with a one-line error.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from autoprof.catalog import amd, arm, host, intel, vendor
from autoprof.errors import AutoprofError

LINUX_ARCH = Path("tools/perf/pmu-events/arch")


def sources(folder: Path, kind: str | None = None) -> dict[str, Path]:
    """Vendor -> the folder its data is copied from."""
    folder = Path(folder)
    if not folder.is_dir():
        raise AutoprofError(f"events update: {folder} is not a directory")
    if (folder / LINUX_ARCH).is_dir():
        found = {
            vendor.AMD: folder / LINUX_ARCH / "x86",
            vendor.ARM64: folder / LINUX_ARCH / "arm64",
        }
    elif (folder / vendor.MAPFILE).is_file():
        found = {vendor.layout(folder): folder}
    else:
        raise AutoprofError(
            f"events update: {folder} has no {vendor.MAPFILE} and is no Linux checkout "
            f"({LINUX_ARCH})"
        )
    if kind is not None:
        if kind not in found:
            raise AutoprofError(f"events update: {folder} holds no {kind} data")
        found = {kind: found[kind]}
    return found


def _stage(kind: str, source: Path, scratch: Path) -> None:
    """Copy `source` into `scratch`: an x86 folder of perf keeps only its AMD rows and folders."""
    if kind == vendor.AMD and any(source.glob("amdzen*")):
        lines = (source / vendor.MAPFILE).read_text().splitlines()
        kept = [ln for ln in lines if ln.startswith(("Family-model", "AuthenticAMD"))]
        (scratch / vendor.MAPFILE).write_text("\n".join(kept) + "\n")
        for model in sorted(source.glob("amdzen*")):
            shutil.copytree(model, scratch / model.name)
        return
    shutil.copytree(source, scratch, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".git"))


def check(kind: str, folder: Path) -> int:
    """Parse every model of a vendor's data; the number of models, or AutoprofError."""
    if vendor.layout(folder) != kind:
        raise AutoprofError(f"{folder}/{vendor.MAPFILE} is not {kind} data")
    if kind == vendor.INTEL:
        names = list(intel.platform_cpu_ids(folder))
        for name in names:
            intel.load(folder, name)
    else:
        reader = amd if kind == vendor.AMD else arm
        names = sorted(set(reader.models(folder).values()))  # one CPU id per model
        for cpu_id in names:
            reader.load(folder, cpu_id)
    if not names:
        raise AutoprofError(f"{folder}/{vendor.MAPFILE} names no model")
    return len(names)


def update(folder: Path, kind: str | None = None) -> list[tuple[str, Path, int]]:
    """Install the data of `folder` for each vendor it holds: (vendor, where, models)."""
    done = []
    for name, source in sources(folder, kind).items():
        target = host.user_events_dir(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=target.parent))
        try:
            _stage(name, source, scratch)
            models = check(name, scratch)
            old = target.with_name(f".{name}-old-{os.getpid()}")
            if target.exists():
                os.rename(target, old)
            os.rename(scratch, target)
            shutil.rmtree(old, ignore_errors=True)
        except (AutoprofError, OSError) as err:
            raise AutoprofError(
                f"events update: {source} is not usable {name} data: {err}"
            ) from None
        finally:  # whatever stopped it (Ctrl-C too), no scratch copy stays in the cache
            shutil.rmtree(scratch, ignore_errors=True)
        done.append((name, target, models))
    return done
