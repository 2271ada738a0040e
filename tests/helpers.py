"""Plain helpers that more than one test module uses (their fixtures are in conftest.py): a
real `autoprof serve` process and the web app in this process, Chromium's command line, results
files and PNGs for the analyses, a changed copy of a perfmon catalog, a zen4 profile of known
counts. Test modules import from here, never from one another."""

from __future__ import annotations

import http.client
import json
import shutil
import socket
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from starlette.testclient import TestClient

from autoprof.catalog import host
from autoprof.catalog.facts import MachineFacts
from autoprof.metrics import catalog as metric_catalog
from autoprof.metrics.plan import plan_metrics
from autoprof.queue.spec import compile_allow
from autoprof.results import csvfile
from autoprof.run import outdir
from autoprof.store import engine
from autoprof.testing.cli import invoke
from autoprof.testing.synthetic_out import profile_from_plan
from autoprof.web.app import create_app
from autoprof.web.state import TOKEN_HEADER, Settings

# --- the web server: a real `autoprof serve` process, or its app in this process ----------------

TOKEN = "s" * 24  # the token of both
START_S = 120  # a server that has not listened by then has failed (16 s was too few at load 9)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Served:
    port: int
    proc: subprocess.Popen
    log: Path
    run_id: str
    job_id: str

    def request(
        self, method: str, path: str, body: bytes | None = None, headers: dict | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        """One request with exactly these headers (Host defaults to 127.0.0.1:PORT)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        sent = {"Host": f"127.0.0.1:{self.port}", **(headers or {})}
        if body is not None:
            sent.setdefault("Content-Length", str(len(body)))
        for key, value in sent.items():
            if value is not None:
                conn.putheader(key, value)
        conn.endheaders(body)
        answer = conn.getresponse()
        data = answer.read()
        conn.close()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, data

    def post_job(self, job, content_type: str = "application/json", **headers) -> tuple:
        body = job if isinstance(job, bytes) else json.dumps(job).encode()
        auth = {TOKEN_HEADER: TOKEN, "Content-Type": content_type, **headers}
        return self.request("POST", "/api/jobs", body, auth)


def start_serve(
    tmp_path: Path,
    *args: str,
    env: dict[str, str] | None = None,
    prefix: tuple[str, ...] = (),
    store: bool = True,
) -> tuple[subprocess.Popen, int, Path]:
    """`autoprof serve` on a free port (its store in `tmp_path` unless not `store`: then
    $AUTOPROF_STORE of `env`), started as `prefix` says (setpriv ...)."""
    (tmp_path / "token").write_text(TOKEN + "\n")
    port = free_port()
    log = tmp_path / f"serve-{port}.log"
    where = ["--store", f"sqlite:///{tmp_path}/r.db"] if store else []
    argv = [*prefix, sys.executable, "-m", "autoprof", "serve", *where,
            "--port", str(port), "--token-file", str(tmp_path / "token"),
            "--data", str(tmp_path / "data"), *args]  # fmt: skip
    with log.open("wb") as sink:
        proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc, port, log
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"serve did not start: {log.read_text()}")


def stop(proc: subprocess.Popen) -> None:
    """Ends a server `start_serve` started (SIGTERM), and waits for it."""
    proc.terminate()
    proc.wait(timeout=30)


def web_client(url: str, data_dir: Path, allow: list[str] | None = None) -> TestClient:
    """The web app on the store at `url` in this process (Starlette's test client), its token
    TOKEN, its jobs' commands those `allow` matches."""
    settings = Settings(engine.open_store(url), data_dir, TOKEN, compile_allow(allow or []))
    return TestClient(create_app(settings), base_url="http://127.0.0.1")


# --- Chromium, driven by Playwright (never downloaded: Debian's, or a skip) ---------------------

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


# --- results files and PNGs for the analyses ---------------------------------------------------


def results_frame(
    series: dict[str, np.ndarray],
    run_of: dict[str, int] | None = None,
    cpus: int = 0,
    times: np.ndarray | None = None,
    pmu: str = "software",
) -> pd.DataFrame:
    """A results frame from per-event values of shape (repeats, intervals); NaN = not counted.
    With `cpus`, each value is counted on that many CPUs (value + cpu, so the mean is value +
    (cpus - 1) / 2)."""
    rows = []
    for event, values in series.items():
        values = np.atleast_2d(values)
        for repeat, per_interval in enumerate(values, 1):
            for index, value in enumerate(per_interval):
                for cpu in range(max(cpus, 1)):
                    counted = not np.isnan(value)
                    rows.append(
                        {
                            "EVENT_NAME": event,
                            "INDEX": index,
                            "TIME": times[index] if times is not None else 0.1 * (index + 1),
                            "SOCKET": 0 if cpus else None,
                            "CORE": cpu if cpus else None,
                            "CPU": cpu if cpus else None,
                            "NODE": 0 if cpus else None,
                            "UNIT": "cpu" if cpus else pmu,
                            "SAMPLE_VALUE": value + cpu if counted else None,
                            "RUN": (run_of or {}).get(event, 1),
                            "REPEAT": repeat,
                            "PMU": pmu,
                            "VALUE_UNIT": None,
                            "PERCENT_RUNNING": 100.0 if counted else None,
                            "STATUS": "ok" if counted else "not counted",
                        }
                    )
    return csvfile.normalize(pd.DataFrame(rows))


def write_results(frame: pd.DataFrame, folder: Path, cpu_id: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "results.csv"
    csvfile.write_csv(frame, path)
    if cpu_id is not None:
        machine = MachineFacts(cpu_id, "test", "host", "6.1", "6.1", False, False, 2)
        manifest = outdir.Manifest("id", "0.1.0", "2026-01-01T00:00:00Z", ["w"], machine, {})
        outdir.write_manifest(folder, manifest)
    return path


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk, after checking the signature."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])


# --- catalogs and profiles ----------------------------------------------------------------------

# a real profile folder, written by main at ed64973 (tests/data/profile-ed64973/README.md)
PROFILE = Path(__file__).parent / "data" / "profile-ed64973"


def skl_catalog_copy(tmp_path: Path, intel_dir: Path, mutate) -> Path:
    """A copy of the SKL perfmon files with one event changed by `mutate`."""
    (tmp_path / "SKL" / "events").mkdir(parents=True)
    rows = [r for r in (intel_dir / "mapfile.csv").read_text().splitlines() if "/SKL/" in r]
    (tmp_path / "mapfile.csv").write_text(
        "Family-model,Version,Filename,EventType,Core Type,Native Model ID,Core Role Name\n"
        + "\n".join(rows)
        + "\n"
    )
    for path in (intel_dir / "SKL" / "events").glob("*.json"):
        data = json.loads(path.read_text())
        if path.name == "skylake_core.json":
            mutate(data["Events"])
        (tmp_path / "SKL" / "events" / path.name).write_text(json.dumps(data))
    return tmp_path


# a zen4 plan's counts, chosen by hand (test_perf_metrics.py computes its metrics from them)
ZEN4_COUNTS = {
    "ls_not_halted_cyc": 1_000_000,  # slots = 6 per cycle: 6,000,000
    "de_no_dispatch_per_slot.no_ops_from_frontend": 1_200_000,
    "de_no_dispatch_per_slot.no_ops_from_frontend:cmask=0x6": 150_000,
    "de_src_op_disp.all": 2_500_000,
    "ex_ret_ops": 2_100_000,
    "de_no_dispatch_per_slot.backend_stalls": 1_800_000,
    "de_no_dispatch_per_slot.smt_contention": 600_000,
    "ex_ret_brn_misp": 30_000,
    "resyncs_or_nc_redirects": 10_000,
    "ex_no_retire.load_not_complete": 600,
    "ex_no_retire.not_complete": 2_400,
    "ex_ret_ucode_ops": 210_000,
    "ex_ret_brn": 600_000,
    "ic_tag_hit_miss.instruction_cache_miss": 0,
    "ic_tag_hit_miss.all_instruction_cache_accesses": 0,
    "umc_cas_cmd.all": 1_000_000,
    "l3_xi_sampled_latency.all": 5_000,
    "l3_xi_sampled_latency_requests.all": 250,
}


def zen4_profile(tmp_path: Path) -> Path:
    """A zen4 profile of a PipelineL1/L2 plan whose every event counted ZEN4_COUNTS, aggregated."""
    catalog = host.build_catalog(cpu="zen4", deprecated=True, experimental=True)
    found = metric_catalog.for_machine(None, "zen4")
    planned = plan_metrics(catalog, found.select(["PipelineL1", "PipelineL2"]), True, True)
    out = profile_from_plan(
        tmp_path / "out", planned.plan, lambda e: ZEN4_COUNTS[e.name], intervals=10
    )
    assert invoke("aggregate", str(out)).returncode == 0
    return out
