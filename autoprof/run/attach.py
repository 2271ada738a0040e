"""Attached profiles: the plan measured on programs that already run (`profile -p PID`,
`--cgroup NAME`, `-a` with no command), each group for `--duration` seconds, one after another.

Unlike a profile of a command, the groups of an attached profile see different moments of the
target: the manifest's `attach` records the targets and every run's start and end, so analyses
can say when they compare events of different runs. When a watched process exits, its run is
marked `target-exited` (not finished: its counts cover part of the duration) and the profile
stops; the runs left are missing until `profile --resume` runs them against a new process.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from autoprof.errors import AutoprofError
from autoprof.perf import command as perf_command
from autoprof.run import outdir
from autoprof.run.options import ProfileOptions
from autoprof.run.outdir import Manifest, RunRecord
from autoprof.util.clock import now_iso
from autoprof.util.status import RunStatus

if TYPE_CHECKING:
    from autoprof.perf.command import OpenFailure
    from autoprof.run.options import ProfileOptions

WARNING = (
    "an attached profile measures each group at a different moment of the target: events of "
    "different runs are not measured at the same time (run times are in manifest.json)"
)


def pid_list(pids: str | None) -> list[int]:
    """`12,34` -> [12, 34]; raises on anything else."""
    if not pids:
        return []
    try:
        found = [int(p) for p in pids.split(",") if p.strip()]
    except ValueError:
        raise AutoprofError(f"-p {pids}: expected process ids separated by commas") from None
    if not found or any(p <= 0 for p in found):
        raise AutoprofError(f"-p {pids}: expected process ids separated by commas")
    return found


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (an exited child its parent has not reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] not in ("Z", "X")


def check_target(options: ProfileOptions) -> None:
    """Refuse a target that is not there before any run starts."""
    gone = [str(p) for p in pid_list(options.pids) if not alive(p)]
    if gone:
        raise AutoprofError(f"no running process {', '.join(gone)} to attach to")
    if options.cgroup and not any((root / options.cgroup).is_dir() for root in _cgroup_roots()):
        raise AutoprofError(f"no cgroup {options.cgroup} under /sys/fs/cgroup")


def _cgroup_roots() -> list[Path]:
    base = Path("/sys/fs/cgroup")
    return [base, base / "unified", base / "perf_event"]


def describe(options: ProfileOptions) -> str:
    if options.pids:
        return f"process {options.pids}"
    if options.cgroup:
        return f"cgroup {options.cgroup}"
    return f"CPUs {options.cpu_list}" if options.cpu_list else "the whole system"


def label(perf_label: str, options: ProfileOptions) -> str:
    """What perf prints for an event: with -G, the cgroup's name follows the event's."""
    return f"{perf_label},{options.cgroup}" if options.cgroup else perf_label


def target_gone(records: list[RunRecord]) -> bool:
    """A run of these found its target exited: the profile stops there."""
    return any(r.status == RunStatus.TARGET_EXITED for r in records)


def classify(
    record: RunRecord,
    code: int,
    counted: bool,
    failure: OpenFailure | None,
    stderr: str,
    options: ProfileOptions,
) -> None:
    """ok / target-exited / perf-failed for a run attached to a running target."""
    gone = [str(p) for p in pid_list(options.pids) if not alive(p)]
    if gone:  # first: perf's "No such process" for an event is not the event's fault
        record.status = RunStatus.TARGET_EXITED
        record.error = (
            f"process {', '.join(gone)} exited {record.elapsed_s:.3g} s into this run "
            f"of {options.duration:g} s"
        )
    elif failure and not counted:
        record.status = RunStatus.PERF_FAILED
        record.error = f"perf could not open {failure.event}: {failure.reason}"
    elif code != 0 or not counted:
        last = stderr.strip().splitlines()[-1][:200] if stderr.strip() else "no message"
        record.status = RunStatus.PERF_FAILED
        record.error = f"perf exited {code} ({last})"
    else:
        record.status = RunStatus.OK


def perf_argv(folder: Path, specs: list[str], options: ProfileOptions, perf: str) -> list[str]:
    """The argv of one attached run (the runner's `perf_argv` for an attached profile)."""
    return perf_command.attach_argv(
        specs,
        str(folder / outdir.PERF_OUTPUT),
        options.duration or 0.0,
        pids=options.pids,
        cgroup=options.cgroup,
        system_wide=options.system_wide,
        cpu_list=options.cpu_list,
        interval_ms=options.interval_ms,
        no_merge=any(s.startswith("uncore_") for s in specs),
        perf=perf,
    )


def start(out: Path, manifest: Manifest, options: ProfileOptions, resume: bool) -> None:
    """Record the target in the manifest; a profile attached to another target continues only
    with `resume` (the new process carries on the old one's plan)."""
    target = {"pids": options.pids, "cgroup": options.cgroup, "since": now_iso()}
    targets = manifest.attach.get("targets", [])
    if targets:
        last = targets[-1]
        if (last["pids"], last["cgroup"]) == (options.pids, options.cgroup):
            return
        if not resume:
            raise AutoprofError(
                f"{out} holds a profile attached to "
                f"{'process ' + last['pids'] if last['pids'] else 'cgroup ' + str(last['cgroup'])}"
                f"; add --resume to measure its missing runs on {describe(options)}, "
                "or use another -o"
            )
    manifest.attach = {
        "duration_s": options.duration,
        "warning": WARNING,
        "targets": [*targets, target],
        "runs": manifest.attach.get("runs", {}),
    }
    outdir.write_manifest(out, manifest)


def record_runs(out: Path, manifest: Manifest, records: list[RunRecord], options) -> None:
    """Each finished run's start, end and target in the manifest (the moments it saw)."""
    runs = manifest.attach.setdefault("runs", {})
    for r in records:
        runs[f"{r.run}.{r.repeat}.{r.part}"] = {
            "start": r.start,
            "end": r.end,
            "status": r.status,
            "pids": options.pids,
            "cgroup": options.cgroup,
        }
    outdir.write_manifest(out, manifest)
