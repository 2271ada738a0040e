"""Build, cache and boot the PMU lane (see the package docstring).

What a boot needs, from the package registries, cached outside the repository in
``$XDG_CACHE_HOME/autoprof-pmu-lane/`` (default ``~/.cache``), each piece under a name that is
a digest of its inputs, so a changed input builds that piece again and nothing else:

- ``system-<key>/``: the kernel (Debian's arm64 vmlinuz is a plain Image that ``-kernel``
  boots) and ``system.cpio``, an uncompressed newc initramfs of the root filesystem that
  ``mmdebstrap --variant=extract`` unpacks from Debian 12's packages (no binfmt, no maintainer
  scripts: ``/init`` runs ldconfig), less what no check reads (modules, documentation); plus
  ``site/``'s Python packages for aarch64 (``pip download --platform manylinux_2_28_aarch64
  --python-version 3.11``, ``pip install --target``, tests and headers left out).
  Keyed on the Debian sources, the package lists and the Python requirements.
- per boot, ``payload.cpio``: this checkout's autoprof and pyproject.toml, ``guest.py``,
  ``/init``, ``loop`` assembled from loop.S (binutils-aarch64-linux-gnu), ``regions``
  compiled from autoprof's examples/regions.c with autoprof.h, and autoprof's native launcher
  (perf/launcher.c, by `make launcher` as `make install` builds it, with the cross compiler:
  the guest has none), where the guest's autoprof finds it (gcc-aarch64-linux-gnu).

The kernel unpacks concatenated cpio archives one after the other, so a boot's initrd is the
cached system archive followed by the payload. Uncompressed: gzip costs ~30 s of emulated
decompression per boot.

`python -m tests.pmu_lane.lane` builds and boots once, printing each piece's time and every
guest check (the guest's console is kept in the cache's ``last-boot.log``).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
FORMAT = 2  # bump to rebuild every cached piece (a change of how they are built)
SUITE = "bookworm"
PACKAGES = ("linux-image-arm64", "busybox-static", "linux-perf", "python3", "libc-bin")
# the pyproject dependencies the guest checks import (schedule, profile, aggregate)
GUEST_REQUIREMENTS = ("click", "networkx", "pandas", "pyarrow", "numpy", "PyYAML", "rich")
PLATFORM = ("--platform", "manylinux_2_28_aarch64", "--python-version", "3.11")
PLATFORM += ("--implementation", "cp", "--abi", "cp311", "--only-binary=:all:")
# left out of the root filesystem: nothing in the guest reads them
DROPPED = re.compile(
    r"^(lib/modules|usr/lib/linux-image-[^/]*|usr/share/(doc|man|info|locale|lintian)|"
    r"lib/udev/hwdb\.d|boot)(/|$)"
)
SITE_DROPPED = re.compile(r"(^|/)(tests|include)(/|$)")
TOOLS = {
    "qemu-system-aarch64": "qemu-system-arm",
    "mmdebstrap": "mmdebstrap",
    "aarch64-linux-gnu-as": "binutils-aarch64-linux-gnu",
    "aarch64-linux-gnu-ld": "binutils-aarch64-linux-gnu",
    "aarch64-linux-gnu-gcc": "gcc-aarch64-linux-gnu",
}
QEMU = ("qemu-system-aarch64", "-M", "virt", "-cpu", "cortex-a76", "-smp", "1", "-m", "3072")
QEMU += ("-icount", "shift=0", "-nographic", "-no-reboot", "-monitor", "none")
CMDLINE = "console=ttyAMA0 rdinit=/init quiet loglevel=1"
LAUNCHER = "launcher-aarch64"  # autoprof/perf/launch.py's LAUNCHER in the guest
# what make install builds for this machine, not for the guest: the launcher, the help cache
HOST_BUILT = ("perf/launcher-*", "commands/help.cache")
MARK = "@@AUTOPROF-LANE"
BOOT_TIMEOUT_S = 1500.0
# what apt, mmdebstrap and pip print when a registry cannot be reached
_UNREACHABLE = re.compile(
    r"Could not resolve|Temporary failure (in name resolution|resolving)|Failed to fetch|"
    r"Network is unreachable|Connection (refused|timed out)|Unable to connect|"
    r"Max retries exceeded|NewConnectionError|No matching distribution found|"
    r"Could not find a version",
    re.IGNORECASE,
)


class Unavailable(Exception):
    """The lane cannot be had here (qemu or a builder missing, a registry unreachable): its
    tests skip with this one line."""


def cache_root() -> Path:
    value = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(value) if os.path.isabs(value) else Path.home() / ".cache"
    return base / "autoprof-pmu-lane"


def missing_tools() -> list[str]:
    return sorted({pkg for tool, pkg in TOOLS.items() if shutil.which(tool) is None})


def _digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps([FORMAT, *parts], sort_keys=True).encode()).hexdigest()[:16]


# ---- Debian sources -------------------------------------------------------------------------


def debian_mirrors(root: Path = Path("/etc/apt")) -> tuple[str, str]:
    """(archive URI, security URI) of this machine's Debian sources (deb822 or one-line), so the
    guest's packages come from the mirror this machine uses; deb.debian.org when none says."""
    archive, security = "http://deb.debian.org/debian", "http://deb.debian.org/debian-security"
    texts = []
    for path in [root / "sources.list", *sorted((root / "sources.list.d").glob("*"))]:
        if path.suffix in (".list", ".sources") and path.is_file():
            texts.append(path.read_text(errors="replace"))
    uris = []
    for text in texts:
        uris += re.findall(r"^URIs:\s*(\S+)", text, re.MULTILINE)
        uris += re.findall(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s", text, re.MULTILINE)
    for uri in uris:
        uri = uri.rstrip("/")
        if uri.endswith("/debian-security"):
            security = uri
        elif uri.endswith("/debian"):
            archive = uri
    return archive, security


def source_lines() -> list[str]:
    archive, security = debian_mirrors()
    return [
        f"deb {archive} {SUITE} main",
        f"deb {archive} {SUITE}-updates main",
        f"deb {security} {SUITE}-security main",
    ]


# ---- cpio (newc) ---------------------------------------------------------------------------


class Cpio:
    """An uncompressed newc archive as the kernel's initramfs unpacker reads it."""

    def __init__(self, out: io.BufferedWriter):
        self.out = out
        self.inode = 1

    def add(self, name: str, mode: int, data: bytes = b"", mtime: int = 0) -> None:
        name = name.lstrip("./") if name not in (".", "./") else "."
        encoded = name.encode() + b"\0"
        fields = [self.inode, mode, 0, 0, 1, mtime, len(data), 0, 0, 0, 0, len(encoded), 0]
        self.inode += 1
        header = b"070701" + b"".join(b"%08X" % f for f in fields)
        self.out.write(header + encoded + b"\0" * (-(110 + len(encoded)) % 4))
        self.out.write(data + b"\0" * (-len(data) % 4))

    def directory(self, name: str) -> None:
        self.add(name, stat.S_IFDIR | 0o755)

    def file(self, name: str, data: bytes, executable: bool = False, mtime: int = 0) -> None:
        self.add(name, stat.S_IFREG | (0o755 if executable else 0o644), data, mtime)

    def tree(self, source: Path, prefix: str, skip: re.Pattern | None = None) -> None:
        """Every directory, file and symlink under `source`, as `prefix`/... (the folders of
        `prefix` first: the kernel creates no missing parent)."""
        for parent in _directories([f"{prefix}/x"]):
            self.directory(parent)
        for folder, dirs, files in os.walk(source):
            rel = Path(folder).relative_to(source)
            dirs[:] = sorted(d for d in dirs if not (skip and skip.search(str(rel / d))))
            if rel != Path("."):
                self.directory(str(Path(prefix) / rel))
            for name in sorted(files):
                path = Path(folder) / name
                if skip and skip.search(str(rel / name)):
                    continue
                info = path.lstat()
                target = str(Path(prefix) / rel / name)
                if stat.S_ISLNK(info.st_mode):
                    self.add(target, stat.S_IFLNK | 0o777, os.readlink(path).encode())
                elif stat.S_ISREG(info.st_mode):
                    self.add(target, info.st_mode, path.read_bytes(), int(info.st_mtime))

    def close(self) -> None:
        self.add("TRAILER!!!", 0)


def tar_to_cpio(tar: tarfile.TarFile, cpio: Cpio) -> bytes:
    """The members of a root filesystem tar (less `DROPPED`) into `cpio`; returns the kernel
    image found in /boot (which the archive leaves out)."""
    kernel = b""
    for member in tar:
        name = member.name.removeprefix("./")
        if re.fullmatch(r"boot/vmlinuz-[^/]+", name):
            kernel = _read(tar, member)
        if not name or DROPPED.match(name):
            continue
        perm = member.mode & 0o7777
        if member.isdir():
            cpio.add(name, stat.S_IFDIR | perm, mtime=int(member.mtime))
        elif member.issym():
            cpio.add(name, stat.S_IFLNK | 0o777, member.linkname.encode(), int(member.mtime))
        elif member.isfile() or member.islnk():  # a hard link becomes a copy
            cpio.add(name, stat.S_IFREG | perm, _read(tar, member), int(member.mtime))
    for name in ("proc", "sys", "dev", "tmp", "root", "run"):
        cpio.directory(name)
    # what base-passwd's maintainer script would have written: root's account
    cpio.file("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n")
    cpio.file("etc/group", b"root:x:0:\n")
    return kernel


def _read(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    handle = tar.extractfile(member)
    return handle.read() if handle else b""


# ---- building ------------------------------------------------------------------------------


@dataclass
class Built:
    kernel: Path
    system: Path  # system.cpio: root filesystem + Python packages
    facts: dict = field(default_factory=dict)  # versions, build times
    seconds: dict[str, float] = field(default_factory=dict)


def _run(argv: list[str], what: str, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, capture_output=True, text=True, **kw)
    if proc.returncode != 0:
        text = proc.stderr + proc.stdout
        found = _UNREACHABLE.search(text)
        if found:
            line = next(ln for ln in text.splitlines() if found.group(0) in ln)
            raise Unavailable(f"the package registries cannot be reached ({what}): {line.strip()}")
        tail = "\n".join(text.strip().splitlines()[-15:])
        raise RuntimeError(f"{what} failed ({proc.returncode}):\n{tail}")
    return proc


def requirements(pyproject: Path = REPO / "pyproject.toml") -> list[str]:
    """The pyproject dependencies of `GUEST_REQUIREMENTS`, with pyproject's version bounds."""
    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    wanted = {n.lower() for n in GUEST_REQUIREMENTS}
    chosen = [d for d in deps if re.split(r"[<>=!~\[ ;]", d, maxsplit=1)[0].lower() in wanted]
    if len(chosen) != len(wanted):
        raise RuntimeError(f"pyproject.toml lacks one of {GUEST_REQUIREMENTS}")
    return chosen


def build(root: Path | None = None, log=lambda text: None) -> Built:
    """The cached kernel and system archive, built first when missing."""
    missing = missing_tools()
    if missing:
        raise Unavailable(
            f"needs {', '.join(missing)} (Debian packages; `make system-deps` installs them as "
            "root)"
        )
    root = root or cache_root()
    sources, reqs = source_lines(), requirements()
    key = _digest(SUITE, PACKAGES, sources, reqs, PLATFORM, DROPPED.pattern, SITE_DROPPED.pattern)
    folder = root / f"system-{key}"
    done = folder / "facts.json"
    if done.is_file():
        facts = json.loads(done.read_text())
        return Built(folder / "Image", folder / "system.cpio", facts, {"cached": 0.0})
    root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
    seconds: dict[str, float] = {}
    try:
        started = time.monotonic()
        log(f"mmdebstrap {SUITE} arm64 ({', '.join(PACKAGES)}) from {sources[0].split()[1]}")
        rootfs = scratch / "rootfs.tar"
        _run(
            [
                "mmdebstrap",
                "--variant=extract",
                "--format=tar",
                "--architectures=arm64",
                f"--include={','.join(PACKAGES)}",
                SUITE,
                str(rootfs),
                *sources,
            ],
            "mmdebstrap",
            timeout=3600,
        )
        seconds["rootfs"] = time.monotonic() - started
        started = time.monotonic()
        log(f"pip: {' '.join(reqs)} for aarch64, Python 3.11")
        wheels, site = scratch / "wheels", scratch / "site"
        pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
        _run([*pip, "download", "-q", "--dest", str(wheels), *PLATFORM, *reqs], "pip download")
        _run(
            [*pip, "install", "-q", "--no-index", "--find-links", str(wheels), "--target",
             str(site), *PLATFORM, *reqs],
            "pip install --target",
        )  # fmt: skip
        seconds["wheels"] = time.monotonic() - started
        started = time.monotonic()
        with (scratch / "system.cpio").open("wb") as out:
            cpio = Cpio(out)
            with tarfile.open(rootfs) as tar:
                kernel = tar_to_cpio(tar, cpio)
            cpio.tree(site, "opt/lane/site", skip=SITE_DROPPED)
            cpio.close()
        if not kernel.startswith(b"MZ") or kernel[0x38:0x3C] != b"ARM\x64":
            raise RuntimeError("the vmlinuz of linux-image-arm64 is not a plain arm64 Image")
        (scratch / "Image").write_bytes(kernel)
        seconds["cpio"] = time.monotonic() - started
        facts = {
            "key": key,
            "sources": sources,
            "requirements": reqs,
            "wheels": sorted(p.name for p in wheels.iterdir()),
            "seconds": seconds,
        }
        rootfs.unlink()
        shutil.rmtree(wheels)
        shutil.rmtree(site)
        (scratch / "facts.json").write_text(json.dumps(facts, indent=1))
        try:
            scratch.rename(folder)
        except OSError:  # another session built it meanwhile
            shutil.rmtree(scratch, ignore_errors=True)
    finally:
        if scratch.exists():
            shutil.rmtree(scratch, ignore_errors=True)
    return Built(folder / "Image", folder / "system.cpio", facts, seconds)


def payload(out: Path, work: Path) -> None:
    """The per-boot archive: /init, guest.py, loop (assembled now), regions (the region
    example, compiled now against this checkout's autoprof.h), this checkout's autoprof with
    its native launcher (compiled now)."""
    obj, loop = work / "loop.o", work / "loop"
    _run(["aarch64-linux-gnu-as", "-o", str(obj), str(HERE / "loop.S")], "assembling loop.S")
    _run(["aarch64-linux-gnu-ld", "-static", "-o", str(loop), str(obj)], "linking loop")
    regions = work / "regions"
    markers = REPO / "autoprof" / "markers"
    source = REPO / "autoprof" / "examples" / "regions.c"
    _run(
        [
            "aarch64-linux-gnu-gcc",
            "-O1",
            "-static",
            f"-I{markers}",
            "-o",
            str(regions),
            str(source),
        ],
        "compiling regions.c",
    )
    launcher = work / LAUNCHER  # as `make install` builds it, for the guest's machine
    _run(
        ["make", "-s", "-C", str(REPO), "launcher", "CC=aarch64-linux-gnu-gcc",
         f"LAUNCHER={launcher}"],
        "compiling launcher.c",
    )  # fmt: skip
    if not launcher.is_file():
        raise RuntimeError("make launcher built no aarch64 launcher")
    files = {
        "opt/lane/guest.py": (HERE / "guest.py").read_bytes(),
        "opt/lane/src/pyproject.toml": (REPO / "pyproject.toml").read_bytes(),
    }
    files |= {f"opt/lane/src/{path}": data for path, data in _package_files(REPO / "autoprof")}
    with out.open("wb") as handle:
        cpio = Cpio(handle)
        cpio.file("init", (HERE / "init").read_bytes(), executable=True)
        guest_launcher = f"opt/lane/src/autoprof/perf/{LAUNCHER}"
        for name in _directories([*files, "opt/lane/loop", "opt/lane/regions", guest_launcher]):
            cpio.directory(name)
        cpio.file("opt/lane/loop", loop.read_bytes(), executable=True)
        cpio.file("opt/lane/regions", regions.read_bytes(), executable=True)
        cpio.file(guest_launcher, launcher.read_bytes(), executable=True)
        for path, data in files.items():
            cpio.file(path, data)
        cpio.close()


def _package_files(package: Path) -> Iterator[tuple[str, bytes]]:
    """autoprof's files, each .py with its byte code when this Python is the guest's minor
    version (unchecked-hash .pyc: valid whatever the archive's mtimes)."""
    import importlib.util
    import marshal

    same = sys.version_info[:2] == (3, 11)
    for path in sorted(package.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        if any(path.match(pattern) for pattern in HOST_BUILT):
            continue
        rel = path.relative_to(package.parent)
        data = path.read_bytes()
        yield str(rel), data
        if same and path.suffix == ".py":
            code = compile(data, str(rel), "exec", dont_inherit=True)
            source_hash = importlib.util.source_hash(data)
            pyc = importlib.util.MAGIC_NUMBER + (1).to_bytes(4, "little") + source_hash
            cached = rel.parent / "__pycache__" / f"{rel.stem}.{sys.implementation.cache_tag}.pyc"
            yield str(cached), pyc + marshal.dumps(code)


def _directories(paths: Iterable[str]) -> list[str]:
    found: set[str] = set()
    for path in paths:
        parts = Path(path).parts[:-1]
        found.update(str(Path(*parts[: i + 1])) for i in range(len(parts)))
    return sorted(found, key=lambda p: (p.count("/"), p))


# ---- booting -------------------------------------------------------------------------------


@dataclass
class Boot:
    """What one boot found: each check's record by name, the console, the times."""

    checks: dict[str, dict]
    console: str
    seconds: float
    exit_line: str | None


def boot(built: Built, root: Path | None = None, timeout: float = BOOT_TIMEOUT_S) -> Boot:
    """Boot the lane once with this checkout, running every guest check."""
    root = root or cache_root()
    with tempfile.TemporaryDirectory(prefix="boot-", dir=root) as tmp:
        work = Path(tmp)
        payload(work / "payload.cpio", work)
        initrd = work / "initrd.cpio"
        with initrd.open("wb") as out:
            for part in (built.system, work / "payload.cpio"):
                with part.open("rb") as source:
                    shutil.copyfileobj(source, out, 1 << 20)
        argv = [*QEMU, "-kernel", str(built.kernel), "-initrd", str(initrd), "-append", CMDLINE]
        log = root / f"boot-{os.getpid()}.log"  # the console as it comes: `tail -f` it
        kept = root / "last-boot.log"  # then the last boot's, whole (boots may run side by side)
        started = time.monotonic()
        with log.open("wb") as console_out:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=console_out,
                                    stderr=subprocess.STDOUT)  # fmt: skip
            try:
                proc.wait(timeout)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                os.replace(log, kept)
        seconds = time.monotonic() - started
    return read_console(kept, seconds)


def read_console(log: Path, seconds: float = 0.0) -> Boot:
    """What a boot's console (`log`) says each check found."""
    console = log.read_bytes().decode(errors="replace").replace("\r\n", "\n")
    checks: dict[str, dict] = {}
    exit_line = None
    for line in console.splitlines():
        if line.startswith(f"{MARK}-EXIT"):
            exit_line = line
        elif line.startswith(f"{MARK} "):
            record = json.loads(line[len(MARK) + 1 :])
            checks[record.pop("check")] = record
    return Boot(checks, console, seconds, exit_line)


def counts_table(
    found: Boot, programs: Iterable[int | str] = (1_000_000, 2_000_000, "true")
) -> str:
    """Markdown: autoprof's counts (results.csv) of the loop at each N and of `true` against
    bare perf's (first of its runs, and the range of all), user-only and all modes."""
    rows = ["| loop N or program | event | bare perf | autoprof | autoprof - bare |"]
    rows.append("|---|---|---|---|---|")
    for n in programs:
        label = n if isinstance(n, str) else f"{n:,}"
        bare = found.checks.get(f"bare-{n}", {}).get("runs", [])
        ours = found.checks.get(f"modes-{n}", {}).get("results", {})
        user = found.checks.get(f"user-{n}", {}).get("results", {})
        for event, perf_name, mine in (
            ("INST_RETIRED:u (--user)", "r08:u", user.get("INST_RETIRED:u")),
            ("INST_RETIRED:u", "r08:u", ours.get("INST_RETIRED:u")),
            ("INST_RETIRED (all modes)", "r08", ours.get("INST_RETIRED")),
            ("page-faults:u (--user)", "page-faults:u", user.get("page-faults:u")),
            ("page-faults:u", "page-faults:u", ours.get("page-faults:u")),
            ("page-faults (all modes)", "page-faults", ours.get("page-faults")),
        ):
            values = [r["counts"].get(perf_name) for r in bare if r.get("counts")]
            if not values or mine is None:
                continue
            low, high = min(values), max(values)
            shown = f"{low:,.0f}" if low == high else f"{low:,.0f} .. {high:,.0f}"
            total = mine["total"]
            diff = total - low if low == high else f"{total - high:+,.0f} .. {total - low:+,.0f}"
            diff = f"{diff:+,.0f}" if isinstance(diff, float) else diff
            rows.append(f"| {label} | {event} | {shown} | {total:,.0f} | {diff} |")
    return "\n".join(rows)


def main() -> None:
    """Build (timed) and boot once, printing what every check found and the counts table."""
    started = time.monotonic()
    built = build(log=lambda text: print(text, flush=True))
    print(f"build: {time.monotonic() - started:.1f} s {built.seconds}", flush=True)
    result = boot(built)
    print(f"boot: {result.seconds:.1f} s, {result.exit_line}")
    for name, record in result.checks.items():
        print(name, json.dumps(record))
    print(counts_table(result))


if __name__ == "__main__":
    main()
