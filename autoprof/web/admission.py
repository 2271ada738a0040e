"""What a job may do on this server, checked before it is queued: run a command that an
--allow matches, set only the harmless environment variables that --allow-env lists, count
events of this machine."""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING

from autoprof.errors import AutoprofError
from autoprof.queue.spec import allowed
from autoprof.web.form import JobRequest

if TYPE_CHECKING:
    from autoprof.catalog.model import Catalog

# The only variables a job may set (the operator picks among them with --allow-env): thread
# counts and placement for OpenMP, BLAS and language runtimes. Each takes a number or a keyword
# that no program turns into code to run, a file to read or a folder to search. An allow-list:
# every other name is refused, whatever --allow-env says, because too many make a program (or
# a library it loads, or perf) run code of the job's choosing past --allow, or read files or
# folders the job chose: the dynamic loader (LD_*), shells (BASH_ENV, ENV), interpreters
# (PYTHON*, PERL*, PERLLIB, LUA_INIT, NODE_*, RUBY*), OPENSSL_CONF, JAVA_TOOL_OPTIONS, libpq's
# PG*, glibc's GCONV_PATH, PATH, HOME, XDG_*, TMPDIR, autoprof's own AUTOPROF_*.
HARMLESS_ENV = frozenset(
    {
        "OMP_NUM_THREADS",
        "OMP_THREAD_LIMIT",
        "OMP_DYNAMIC",
        "OMP_PROC_BIND",
        "OMP_PLACES",
        "OMP_SCHEDULE",
        "OMP_WAIT_POLICY",
        "OMP_STACKSIZE",
        "OMP_MAX_ACTIVE_LEVELS",
        "GOMP_SPINCOUNT",
        "KMP_AFFINITY",
        "KMP_BLOCKTIME",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "BLIS_NUM_THREADS",
        "NUMEXPR_NUM_THREADS",
        "RAYON_NUM_THREADS",
        "JULIA_NUM_THREADS",
        "GOMAXPROCS",
        "GOGC",
        "GOMEMLIMIT",
    }
)


def check_allowed(request: JobRequest, patterns: list[re.Pattern]) -> None:
    """The queue worker's own rule: the shell-joined command must fully match an --allow."""
    if not patterns:
        raise AutoprofError("this server is read-only: start it with --allow REGEX to measure")
    # attaching: --allow '-p [0-9]+'; `record` of a command may attach to a PID as well
    checks = [request.command] if request.command else []
    if request.pid is not None:
        checks.append(["-p", str(request.pid)])
    for checked in checks:
        if not allowed(checked, patterns):
            raise AutoprofError(
                f"refused: command {shlex.join(checked)!r} does not match this server's --allow"
            )


def check_events(request: JobRequest, catalog: Catalog) -> None:
    """A job's events, checked against this machine's `catalog` as its tool checks them before
    any run, so that the form gets the refusal instead of a job bound to fail: every tool's
    events resolve to events of this machine (`host.resolve_events`: an unknown one, or a text
    that is not one event, never reaches perf); a stat/profile job's are planned as the job
    will plan them (`run.planning`: an event of a system-wide-only PMU for a command, two
    events perf would print alike) and must be countable (no hardware event where the kernel
    offers no PMU)."""
    from autoprof.catalog import host
    from autoprof.run import planning

    if not request.events:
        return
    if request.tool == "record":
        host.resolve_events(catalog, request.events)
        return
    planned = planning.plan_catalog(catalog, request.measurement())
    host.refuse_uncountable(planned.catalog)


def refused_env_names(names: list[str]) -> list[str]:
    """The names of `names` that no job may set, however the server was started."""
    return [name for name in names if name not in HARMLESS_ENV]


def harmless_env_text() -> str:
    return ", ".join(sorted(HARMLESS_ENV))


def check_env(request: JobRequest, allowed: frozenset[str]) -> None:
    """A job sets only the variables the operator listed with --allow-env, and only harmless
    ones (HARMLESS_ENV): the command is checked against --allow, its environment must not
    undo that. The variables go to the workload alone, never to autoprof's own processes."""
    for name in request.env:
        if name not in HARMLESS_ENV:
            raise AutoprofError(
                f"refused: a job may not set {name} (only these can be allowed: "
                f"{harmless_env_text()})"
            )
        if name not in allowed:
            raise AutoprofError(
                f"refused: environment variable {name} is not allowed here "
                "(the server's operator lists those a job may set with --allow-env NAME)"
            )
