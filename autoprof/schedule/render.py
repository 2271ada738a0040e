"""`autoprof schedule`'s table: a plan's runs per PMU, with each PMU's lower bound and what
sets it (a `RichRenderer`, so the command only chooses where it goes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from autoprof.schedule.plan import SYSTEM_WIDE_ONLY
from autoprof.util.renderer import RichRenderer

if TYPE_CHECKING:
    from rich.console import Console

    from autoprof.catalog.model import Catalog, Event, Pmu
    from autoprof.schedule.plan import Plan


@dataclass
class Scheduled:
    """A plan with what the table says about it."""

    catalog: Catalog
    plan: Plan
    elapsed_s: float  # how long scheduling took
    metrics: str | None = None  # the metric plan's summary line, for --metrics
    regions: tuple[str, ...] = ()  # profile --region: counted in the same runs


class ScheduleRenderer(RichRenderer[Scheduled]):
    def draw(self, data: Scheduled, console: Console) -> None:
        from rich.table import Table

        from autoprof.schedule.bounds import pmu_bound

        catalog, plan = data.catalog, data.plan
        if data.metrics is not None:
            console.print(f"metrics: {data.metrics}")
        optimal = "optimal" if len(plan) == plan.lower_bound else "above the bound"
        console.print(
            f"[bold]{catalog.cpu}[/]: {len(catalog.events)} events in "
            f"[bold]{len(plan)} runs[/] (lower bound {plan.lower_bound}, {optimal}); "
            f"{len(plan.excluded)} excluded; scheduled in {data.elapsed_s * 1000:.0f} ms"
        )
        table = Table()
        for col in ("pmu", "events", "counters", "bound", "why", "events per run (min-max)"):
            table.add_column(col)
        by_pmu: dict[str, list[Event]] = {}
        for e in catalog.events:
            by_pmu.setdefault(e.pmu, []).append(e)
        load = plan.pmu_load()
        for name, evs in sorted(by_pmu.items()):
            pmu = plan.pmus[name]
            bound = pmu_bound(pmu, evs)
            why = ", ".join(
                f"{k} {v}"
                for k, v in (
                    ("alone", bound.taken_alone),
                    ("counters", bound.counters),
                    ("registers", bound.registers),
                    ("fixed", bound.fixed),
                )
                if v
            )
            table.add_row(
                name,
                str(len(evs)),
                "-" if pmu.unconstrained else counters_cell(pmu),
                str(bound.runs),
                why or "unconstrained",
                f"{min(load[name])}-{max(load[name])}",
            )
        console.print(table)
        wide = sorted(name for name in by_pmu if plan.pmus[name].system_wide)
        if wide:
            count = sum(len(by_pmu[name]) for name in wide)
            console.print(
                f"system-wide only: {', '.join(wide)} ({_events(count)}): the kernel refuses "
                "task-bound events there, so a profile of a command or -p leaves them out; "
                "profile -a or --cpu-list counts them"
            )
        left = [x.pmu for x in plan.excluded if x.reason == SYSTEM_WIDE_ONLY]
        if left:
            console.print(
                f"system-wide only, left out: {', '.join(sorted(set(left)))} "
                f"({_events(len(left))}): the kernel refuses task-bound events there; "
                "profile -a or --cpu-list counts them (schedule -a plans that profile)"
            )
        if data.regions:
            named = ", ".join("every region entered" if r == "all" else r for r in data.regions)
            console.print(
                f"regions ({named}): every event above is counted per region in the same "
                f"{len(plan.runs)} run{'s' if len(plan.runs) != 1 else ''}, read at each "
                "marker: no run more"
            )


def _events(count: int) -> str:
    return f"{count} event" + ("s" if count != 1 else "")


def counters_cell(pmu: Pmu) -> str:
    """`G+Ff` free for autoprof, then what others hold in every run in the same notation: `(1
    reserved)` a generic counter (x86's watchdog), `(1f reserved)` a fixed one (Arm's cycle
    counter, which the watchdog takes first), `(1+1f reserved)` both."""
    held = "+".join(
        part
        for part, n in (
            (str(pmu.reserved), pmu.reserved),
            (f"{pmu.reserved_fixed}f", pmu.reserved_fixed),
        )
        if n
    )
    return f"{pmu.generic}+{pmu.fixed}f" + (f" ({held} reserved)" if held else "")
