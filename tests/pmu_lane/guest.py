"""The guest's half of the PMU lane: run inside the emulated Arm machine by Debian's own
python3, it runs bare perf and the checked-out autoprof (as a user would: `python3 -m autoprof`)
and prints what each check found as one line ``@@AUTOPROF-LANE {json}``. It asserts nothing:
tests/test_pmu_lane.py does, on the host, so that a failure says what it expected.

Only the standard library and autoprof (with its packages on PYTHONPATH) are imported here.
"""

from __future__ import annotations

import csv
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path

MARK = "@@AUTOPROF-LANE"
LOOP = "/opt/lane/loop"
REGIONS = "/opt/lane/regions"  # autoprof's examples/regions.c, with autoprof.h, static
# (OUTSIDE, HOT, INNER, TIMES): the marker cost must come out the same constant for each
REGION_CASES = ((1000, 200, 30, 3), (1000, 400, 60, 3), (2000, 200, 30, 6))
TRUE = "/bin/true"  # coreutils', dynamically linked
SH = ["/bin/busybox", "sh", "-c"]
AUTOPROF = [sys.executable, "-m", "autoprof"]
WORK = Path("/tmp/lane")
NS = (1_000_000, 2_000_000)
LONG = 100_000_000  # 0.5 s of emulated time: five 100 ms intervals
BARE_EVENTS = ("r08:u", "r08", "page-faults:u", "page-faults")
CORE = "armv8_pmuv3"
# seven Cortex-A76 events that need a generic counter each (qemu counts the first, the others
# open and read 0): one run of them needs seven counters
SEVEN = ("INST_RETIRED", "BR_MIS_PRED", "BR_PRED", "L1D_CACHE", "L1D_CACHE_REFILL", "L1I_CACHE",
         "L1I_CACHE_REFILL")  # fmt: skip


def emit(check: str, **found) -> None:
    print(MARK, json.dumps({"check": check, **found}), flush=True)


def run(argv: list[str], timeout: float = 600, keep: int = 4000, env=None) -> dict:
    """`argv`'s exit code, time and the last `keep` characters of its stdout and stderr."""
    started = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    return {
        "argv": argv,
        "rc": proc.returncode,
        "stdout": proc.stdout[-keep:],
        "stderr": proc.stderr[-keep:],
        "seconds": round(time.monotonic() - started, 2),
    }


def bare(command: list[str], events=BARE_EVENTS) -> dict:
    """`perf stat -x,` of `command`: {event as perf printed it: count}."""
    argv = ["perf", "stat", "-x,"]
    for event in events:
        argv += ["-e", event]
    done = run([*argv, "--", *command])
    counts = {}
    for row in csv.reader(done["stderr"].splitlines()):
        if len(row) > 3 and row[0] and row[0][0].isdigit():
            counts[row[2]] = float(row[0])
    return {"counts": counts, "rc": done["rc"], "stderr": done["stderr"][-800:]}


def profile(name: str, *args: str, aggregate: bool = True, env=None) -> dict:
    """`autoprof profile ARGS` into WORK/name, then its results.csv summed per event."""
    out = WORK / name
    done = run([*AUTOPROF, "profile", "-o", str(out), *args], env=env)
    found = {"profile": done}
    if aggregate and (out / "manifest.json").exists():
        from autoprof.results import aggregate as agg

        try:
            result = agg.aggregate_to(out)
            found["report"] = result.report.to_json()
            found["results"] = results(out / "results.csv")
        except Exception as err:  # the host test says what went wrong
            found["aggregate_error"] = f"{type(err).__name__}: {err}"
    folders = sorted((out / "runs").glob("run*")) if (out / "runs").is_dir() else []
    found["runs"] = [json.loads((f / "run.json").read_text()) for f in folders]
    # perf's own output of each run, as it wrote it: what the counts were made of
    found["perf_csv"] = [
        (f / "perf.csv").read_text()[-2000:] for f in folders if (f / "perf.csv").exists()
    ]
    return found


def results(path: Path) -> dict:
    """Per EVENT_NAME: total, rows, lowest PERCENT_RUNNING, the set of STATUS."""
    found: dict[str, dict] = {}
    with path.open() as handle:
        for row in csv.DictReader(handle):
            entry = found.setdefault(
                row["EVENT_NAME"],
                {"total": 0.0, "rows": 0, "min_percent": 100.0, "status": [], "pmu": row["PMU"]},
            )
            if row["SAMPLE_VALUE"]:
                entry["total"] += float(row["SAMPLE_VALUE"])
            entry["rows"] += 1
            if row["PERCENT_RUNNING"]:
                entry["min_percent"] = min(entry["min_percent"], float(row["PERCENT_RUNNING"]))
            if row["STATUS"] not in entry["status"]:
                entry["status"].append(row["STATUS"])
    return found


def kernel_log() -> str:
    """The kernel's log so far (/dev/kmsg, read without blocking)."""
    lines = []
    fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    try:
        while True:
            try:
                record = os.read(fd, 8192)
            except BlockingIOError:
                break
            except OSError:  # EPIPE: a record was overwritten meanwhile; go on
                continue
            lines.append(record.decode(errors="replace").split(";", 1)[-1].strip())
    finally:
        os.close(fd)
    return "\n".join(lines)


def native_launcher() -> str | None:
    """The native launcher every profile here starts its workloads with (None: Python's fork)."""
    from autoprof.perf import launch

    return launch.native_launcher()


def machine() -> None:
    kmsg = kernel_log()
    pmus = sorted(os.listdir("/sys/bus/event_source/devices"))
    core = Path("/sys/bus/event_source/devices", CORE)
    emit(
        "machine",
        python=list(sys.version_info[:3]),
        version=sys.version,
        kernel=platform.release(),
        perf=run(["perf", "--version"])["stdout"].strip(),
        pmu_lines=[ln for ln in kmsg.splitlines() if "perfevents" in ln or "PMU" in ln],
        pmus=pmus,
        formats=sorted(p.name for p in (core / "format").iterdir()) if core.is_dir() else [],
        midr=Path("/sys/devices/system/cpu/cpu0/regs/identification/midr_el1").read_text().strip(),
        launcher=native_launcher(),
    )


def counting() -> None:
    """Bare perf and autoprof on the loop, user-only and all modes; and on `true`, whose
    page faults (a dynamically linked program: the loader's) are the issue's second measure."""

    def modes(*command: str) -> list[str]:
        events = ("INST_RETIRED", "INST_RETIRED:u", "page-faults", "page-faults:u")
        return [arg for event in events for arg in ("-e", event)] + ["--", *command]

    for n in NS:
        emit(f"bare-{n}", runs=[bare([LOOP, str(n)]) for _ in range(3)])
        emit(f"modes-{n}", **profile(f"modes-{n}", *modes(LOOP, str(n))))
        user = ["--user", "-e", "INST_RETIRED", "-e", "page-faults", "--", LOOP, str(n)]
        emit(f"user-{n}", **profile(f"user-{n}", *user))
    emit("bare-true", runs=[bare([TRUE]) for _ in range(3)])
    emit("modes-true", **profile("modes-true", *modes(TRUE)))
    emit(f"bare-{LONG}", runs=[bare([LOOP, str(LONG)], ("r08:u",))])
    emit(
        f"intervals-{LONG}",
        **profile("long", "--user", "-e", "INST_RETIRED", "--", LOOP, str(LONG)),
    )


def children() -> None:
    """Counting inherited by the workload's children: the loop forking (deterministic to the
    instruction), and a shell running it twice.

    Bare perf changes its workload's environment (PATH gets perf's exec path in front,
    PERF_BUILDID_DIR and PREFIX are added) and a shell's count depends on its environment, so
    autoprof runs the shell once as usual (in the user's environment) and once in the very
    environment bare perf gives its workload."""
    emit("bare-fork", runs=[bare([LOOP, "1000000", "fork"], ("r08:u",)) for _ in range(2)])
    emit("fork", **profile("fork", "--user", "-e", "INST_RETIRED", "--", LOOP, "1000000", "fork"))
    script = f"{LOOP} 1000000; {LOOP} 1000000"
    emit("bare-children", runs=[bare([*SH, script], ("r08:u",)) for _ in range(3)])
    emit("children", **profile("children", "--user", "-e", "INST_RETIRED", "--", *SH, script))
    shown = run(["perf", "stat", "-x,", "-o", "/dev/null", "--", "/bin/busybox", "env"])
    perf_env = dict(ln.split("=", 1) for ln in shown["stdout"].splitlines() if "=" in ln)
    emit(
        "children-perf-env",
        env=perf_env,
        **profile("children-env", "--user", "-e", "INST_RETIRED", "--", *SH, script, env=perf_env),
    )


def statuses() -> None:
    """The workload's exit status and signal, in interval mode (where perf stat drops them)."""
    emit("exit-3", **profile("exit-3", "-e", "INST_RETIRED:u", "--", *SH, "exit 3"))
    emit("sigsegv", **profile("sigsegv", "-e", "INST_RETIRED:u", "--", *SH, "kill -SEGV $$"))
    emit("not-found", profile=run([*AUTOPROF, "profile", "-e", "INST_RETIRED", "-o",
                                   str(WORK / "nf"), "--", "no-such-program-xyz"]))  # fmt: skip
    started = time.monotonic()
    timed = profile("timeout", "--timeout", "1", "-e", "INST_RETIRED", "--", LOOP, "10000000000")
    left = [p for p in os.listdir("/proc") if p.isdigit() and _comm(p) in ("loop", "perf")]
    emit("timeout", **timed, seconds=round(time.monotonic() - started, 1), left=left)


def region_results(path: Path) -> dict:
    """Per REGION (empty: the whole program): {EVENT_NAME: [total, lowest PERCENT_RUNNING]}."""
    found: dict[str, dict] = {}
    with path.open() as handle:
        for row in csv.DictReader(handle):
            entry = found.setdefault(row.get("REGION") or "", {}).setdefault(
                row["EVENT_NAME"], [0.0, 100.0]
            )
            entry[0] += float(row["SAMPLE_VALUE"] or 0)
            entry[1] = min(entry[1], float(row["PERCENT_RUNNING"] or 100))
    return found


def regions() -> None:
    """Named regions: user-mode instructions per region, against bare perf's whole counts."""
    for case in REGION_CASES:
        args = [str(n) for n in case]
        name = "regions-" + "-".join(args)
        emit(f"bare-{name}", runs=[bare([REGIONS, *args], ("r08:u",)) for _ in range(2)])
        found = profile(name, "--user", "-e", "INST_RETIRED", "--region", "all", "--",
                        REGIONS, *args)  # fmt: skip
        if (WORK / name / "results.csv").exists():
            found["regions"] = region_results(WORK / name / "results.csv")
        emit(name, **found)


def _comm(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def system_wide() -> None:
    emit("system-wide", **profile("wide", "-a", "--user", "-e", "INST_RETIRED", "--", LOOP,
                                  str(NS[0])))  # fmt: skip


def counters() -> None:
    """The probe, the schedule of every event with its counters, and plans past them."""
    cache = Path.home() / ".cache" / "autoprof"
    done = run([*AUTOPROF, "schedule", "--json"], keep=10**7)
    plan = json.loads(done.pop("stdout")) if done["rc"] == 0 else {}
    emit(
        "schedule",
        **done,
        lower_bound=plan.get("lower_bound"),
        runs=[
            [[e["name"], e["pmu"], e["counter"]] for e in r["events"]] for r in plan.get("runs", [])
        ],
        probes=[json.loads(p.read_text()) for p in sorted(cache.glob("counters.json"))],
    )
    emit(
        "counters-7",
        profile=run(
            [
                *AUTOPROF,
                "profile",
                "--counters",
                f"{CORE}=7",
                "-e",
                "INST_RETIRED",
                "-o",
                str(WORK / "c7"),
                "--",
                LOOP,
                "1000",
            ]
        ),
    )
    seven = [arg for name in SEVEN for arg in ("-e", name)]
    for attempt in (1, 2):
        name = f"forced-{attempt}"
        forced = profile(
            name, "--no-probe", "--counters", f"{CORE}=7", *seven, "--", LOOP, str(NS[0])
        )
        forced["aggregate_cli"] = run([*AUTOPROF, "aggregate", str(WORK / name)])
        emit(name, **forced)


def main() -> int:
    WORK.mkdir(parents=True, exist_ok=True)
    for check in (machine, counters, counting, children, statuses, system_wide, regions):
        started = time.monotonic()
        try:
            check()
        except Exception:
            emit(f"{check.__name__}-crashed", error=traceback.format_exc()[-3000:])
        print(f"{MARK}-TIME {check.__name__} {time.monotonic() - started:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
