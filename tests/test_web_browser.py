"""`autoprof serve` in a real browser (Debian's Chromium driven by Playwright) against a real
server process, real perf profiles in the store and real live jobs.

Skips when perf, /usr/bin/chromium or Playwright is missing; never downloads a browser. Set
AUTOPROF_SHOTS=DIR to keep a PNG screenshot of every page.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from autoprof.testing.cli import invoke, process
from tests.helpers import CHROMIUM, FLAGS, free_port, zen4_profile

pytestmark = pytest.mark.slow

TOKEN = "browser-test-token-0123456789"
EVENTS = ["task-clock", "context-switches", "page-faults"]
WORKLOAD = ["dd", "if=/dev/zero", "of=/dev/null", "bs=64k", "count=40000"]
XSS = "<img src=x onerror=window.pwned=1>"


def processes_with(marker: str) -> list[str]:
    """Command lines of live processes that mention `marker` (read from /proc)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if marker in text and "pytest" not in text:
            found.append(text)
    return found


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`autoprof serve --allow ...` on a store holding two real profiles of dd."""
    if shutil.which("perf") is None:
        pytest.skip("needs perf")
    root = tmp_path_factory.mktemp("serve")
    store = f"sqlite:///{root / 'results.db'}"
    ids = []
    for n in (1, 2):
        out = root / f"out{n}"
        events = [a for e in EVENTS for a in ("-e", e)]
        profiled = process(
            "profile", *events, "--interval", "20", "--repeat", "2", "-o", out, "--", *WORKLOAD
        )
        assert profiled.returncode == 0, profiled.stderr
        assert invoke("aggregate", out).returncode == 0
        tags = ["--tag", f"n={n}", "--tag", f"x={XSS}"]
        assert invoke("upload", out, "--store", store, *tags).returncode == 0
        listing = invoke("runs", "list", "--store", store).stdout.splitlines()
        ids.append(listing[-1].split()[0])
    (root / "token").write_text(TOKEN + "\n")
    port = free_port()
    argv = [sys.executable, "-m", "autoprof", "serve", "--store", store, "--port", str(port)]
    argv += ["--allow", "sh -c .*", "--allow", "dd .*", "--token-file", root / "token"]
    argv += ["--data", root / "data"]
    proc = subprocess.Popen(list(map(str, argv)), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    for _ in range(120):
        try:
            urllib.request.urlopen(base + "/api/runs", timeout=2)
            break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail(f"server did not start: {proc.stdout.read().decode()}")
    yield {"base": base, "ids": ids, "store": store, "root": root}
    proc.terminate()
    proc.wait(timeout=30)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if not Path(CHROMIUM).is_file():
        pytest.skip("Debian's chromium is not installed (make system-deps installs it)")
    with sync_api.sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium")),
            executable_path=CHROMIUM,
            args=FLAGS,
            headless=True,
            viewport={"width": 1400, "height": 900},
            accept_downloads=True,
        )
        try:
            yield context
        finally:
            context.close()


@pytest.fixture
def page(browser, server):
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    # the server's CSP (default-src 'self') must not block anything the pages themselves use
    page.on(
        "console",
        lambda msg: errors.append(msg.text) if "Content Security Policy" in msg.text else None,
    )
    page.on("dialog", lambda dialog: dialog.accept())  # delete's confirmation
    yield page
    page.close()
    assert errors == []


def shot(page, name: str) -> None:
    folder = os.environ.get("AUTOPROF_SHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def login(page, server) -> None:
    page.goto(f"{server['base']}/login?token={TOKEN}")


def test_runs_list_and_compare(page, server):
    page.goto(server["base"] + "/")
    rows = page.locator("table.runs tbody tr")
    assert rows.count() == 2
    assert page.locator("span.tag", has_text=XSS).count() == 2  # the payload shown as text
    assert page.evaluate("window.pwned") is None
    shot(page, "runs")
    for box in page.locator("input.pick").all():
        box.check()
    page.click("#compare-selected")
    page.wait_for_selector("table.compare tbody tr")
    events = page.locator("table.compare tbody tr td:first-child").all_text_contents()
    assert set(EVENTS) <= set(events)
    page.wait_for_selector("#compare-chart .barlayer")
    shot(page, "compare")


def test_run_page_search_plot_and_download(page, server, tmp_path):
    run = server["ids"][0]
    page.goto(f"{server['base']}/runs/{run}")
    page.fill("#event-search", "context")
    visible = page.locator("table.events tbody tr:visible")
    assert visible.count() == 1 and visible.get_attribute("data-event") == "context-switches"
    visible.locator("button.plot").click()
    page.wait_for_selector("#series .scatterlayer .trace")
    plotted = page.evaluate("document.getElementById('series').data.map(t => t.x.length)")
    with page.expect_download() as info:
        page.click("#dl-csv")
    csv = Path(info.value.path()).read_bytes()
    exported = invoke(
        "runs", "export", run, "-o", tmp_path / "export.csv", "--store", server["store"]
    )
    assert exported.returncode == 0, exported.output
    assert csv == (tmp_path / "export.csv").read_bytes()
    # expected points: the intervals of each (run, repeat) of context-switches in the export
    lines = [ln.split(",") for ln in csv.decode().splitlines()[1:]]
    header = csv.decode().splitlines()[0].split(",")
    col = {name: i for i, name in enumerate(header)}
    intervals: dict[tuple[str, str], set[str]] = {}
    for ln in lines:
        if ln[col["EVENT_NAME"]] == "context-switches" and ln[col["SAMPLE_VALUE"]]:
            key = (ln[col["RUN"]], ln[col["REPEAT"]])
            intervals.setdefault(key, set()).add(ln[col["INDEX"]])
    assert sorted(plotted) == sorted(len(v) for v in intervals.values())
    page.wait_for_selector("#heatmap .heatmaplayer, #heatmap p", timeout=30_000)
    page.wait_for_selector("#stats table")
    if page.locator("#heatmap .heatmaplayer").count():  # r = +1 is red, as in the PNG (#29)
        scale = page.evaluate("document.getElementById('heatmap').data[0].colorscale")
        assert scale[0] == [0, "#053061"] and scale[-1] == [1, "#67001f"]
        assert (
            page.evaluate("document.getElementById('heatmap')._fullData[0].reversescale") is False
        )
    shot(page, "run")


def test_delete_with_confirmation(page, server):
    login(page, server)
    extra = server["root"] / "out-del"
    assert process("profile", "-e", "task-clock", "-o", extra, "--", *WORKLOAD).returncode == 0
    assert invoke("aggregate", extra).returncode == 0
    # the newest run: the first row
    assert invoke("upload", extra, "--store", server["store"]).returncode == 0
    page.goto(server["base"] + "/")
    before = page.locator("table.runs tbody tr").count()
    page.locator("table.runs tbody tr").first.locator("button.delete").click()
    page.wait_for_function(
        f"() => document.querySelectorAll('table.runs tbody tr').length == {before - 1}"
    )
    page.reload()
    assert page.locator("table.runs tbody tr").count() == before - 1


def _submit(page, base: str, command: str, tags: str = "") -> None:
    page.goto(base + "/new")
    page.wait_for_selector("#event-list label")
    page.fill("#command", command)
    for event in ("task-clock", "context-switches"):
        page.check(f"input[value='{event}']")
    page.fill("textarea[name=tags]", tags)
    page.click("#start")


def test_live_stat_job_stop_and_queue(page, server):
    login(page, server)
    marker = f"web-live-{os.getpid()}"
    step = "dd if=/dev/zero of=/dev/null bs=64k count=20000 2>/dev/null; sleep 0.2"
    slow = f"sh -c 'for i in $(seq 60); do echo {marker} $i; {step}; done'"
    _submit(page, server["base"], slow)
    page.wait_for_url("**/jobs/*")
    # a second job while the first runs: queued behind it (XSS payload in its command and tag)
    second = page.evaluate(
        """async ([token, command, tags]) => (await (await fetch('/api/jobs', {method: 'POST',
        headers: {'Content-Type': 'application/json', 'X-Autoprof-Token': token},
        body: JSON.stringify({tool: 'stat', command, tags, events: ['task-clock'],
        interval_ms: 50})})).json())""",
        [
            TOKEN,
            f"sh -c 'echo \"{XSS}\"; dd if=/dev/zero of=/dev/null bs=64k count=40000'",
            f"t={XSS}",
        ],
    )
    assert second["state"] == "queued"
    page.wait_for_function(
        "() => Number(document.getElementById('points').textContent) >= 4", timeout=30_000
    )
    assert page.text_content("#state") == "running"
    assert "web-live" in page.text_content("#stdout")
    shot(page, "live")
    assert processes_with(marker)
    page.click("#stop")
    page.wait_for_function(
        "() => document.getElementById('state').textContent == 'stopped'", timeout=60_000
    )
    deadline = time.monotonic() + 30
    while processes_with(marker):  # workload and perf go
        assert time.monotonic() < deadline, processes_with(marker)
        time.sleep(0.05)
    page.goto(f"{server['base']}/jobs/{second['id']}")
    page.wait_for_url("**/runs/*", timeout=60_000)  # it ran after the first and was stored
    assert page.locator("span.tag", has_text=XSS).count() == 1
    assert XSS in page.text_content("p.command")
    assert page.evaluate("window.pwned") is None


def test_new_page_after_login_asks_no_token_and_the_tab_has_an_icon(page, server):
    page.context.clear_cookies()  # the browser is the module's: another test may have logged in
    page.goto(server["base"] + "/new")
    assert page.locator("#token").count() == 1  # not logged in yet
    login(page, server)
    page.goto(server["base"] + "/new")
    assert page.locator("#token").count() == 0
    icon = page.evaluate(
        "fetch('/favicon.ico').then(r => [r.status, r.headers.get('content-type')])"
    )
    assert icon == [200, "image/svg+xml"]
    shot(page, "new-logged-in")


def test_refusals(page, server):
    base = server["base"]
    request = urllib.request.Request(f"{base}/api/runs/{server['ids'][1]}", method="DELETE")
    with pytest.raises(urllib.error.HTTPError) as denied:
        urllib.request.urlopen(request)
    assert denied.value.code == 403
    with pytest.raises(urllib.error.HTTPError) as escaped:
        urllib.request.urlopen(f"{base}/runs/{server['ids'][1]}/files/%2e%2e/%2e%2e/etc/passwd")
    assert escaped.value.code == 404
    login(page, server)
    _submit(page, base, "rm -rf /tmp/nothing-here")
    page.wait_for_function("() => document.getElementById('form-error').textContent != ''")
    assert "does not match this server's --allow" in page.text_content("#form-error")
    shot(page, "new")


def test_record_job_shows_flame_graph_and_top_functions(page, server):
    login(page, server)
    page.goto(server["base"] + "/new")
    job = page.evaluate(
        """async (token) => (await (await fetch('/api/jobs', {method: 'POST',
        headers: {'Content-Type': 'application/json', 'X-Autoprof-Token': token},
        body: JSON.stringify({tool: 'record',
        command: 'dd if=/dev/zero of=/dev/null bs=4k count=300000'})})).json())""",
        TOKEN,
    )
    page.goto(f"{server['base']}/jobs/{job['id']}")
    page.wait_for_url("**/records/*", timeout=120_000)
    svg = urllib.request.urlopen(f"{server['base']}/records/{job['id']}/files/flame.svg").read()
    functions = page.locator("table.top tbody tr td:first-child").all_text_contents()
    assert functions and all(f'data-n="{name}"'.encode() in svg for name in functions[:5])
    percents = [
        float(p) for p in page.locator("table.top tbody tr td:last-child").all_text_contents()
    ]
    # each share is rounded to 2 decimals: the sum may pass 100 by half a unit per row
    assert percents == sorted(percents, reverse=True)
    assert 0 < sum(percents) <= 100 + 0.005 * len(percents)
    # the SVG's own script runs in its sandbox (its own CSP): a click zooms a frame
    page.wait_for_timeout(500)
    flame = next(f for f in page.frames if f.url.endswith("/flame.svg"))
    widths = flame.evaluate(
        """() => { const rect = [...document.querySelectorAll('g.f rect')].at(-1);
        const before = Number(rect.getAttribute('width'));
        rect.parentNode.dispatchEvent(new MouseEvent('click', {bubbles: true}));
        return [before, Number(rect.getAttribute('width'))]; }"""
    )
    assert widths[1] > widths[0]
    assert page.evaluate("document.getElementById('flame').contentDocument") is None  # sandboxed
    page.wait_for_timeout(500)
    shot(page, "record")


def test_run_page_shows_the_top_down_tree(page, server, tmp_path):
    """A zen4 run (hand-chosen counts of a PipelineL1/L2 plan, aggregated and uploaded): its
    page draws the tree `analyze metrics` prints, the bottleneck path in bold."""
    out = zen4_profile(tmp_path)
    assert invoke("upload", out, "--store", server["store"], "--tag", "cpu=zen4").returncode == 0
    listing = invoke("runs", "list", "--store", server["store"], "--tag", "cpu=zen4")
    run = listing.stdout.splitlines()[-1].split()[0]
    page.goto(f"{server['base']}/runs/{run}")
    page.wait_for_selector("#tree table.tree tr", timeout=30_000)
    rows = page.locator("#tree table.tree tr")
    assert rows.count() == 13
    first = rows.nth(0).locator("td").all_text_contents()
    assert first[:2] == ["frontend_bound", "20.0%"]
    bold = page.locator("#tree tr.path td:first-child").all_text_contents()
    assert bold == ["retiring", "retiring_fastpath"]  # 35%, then its larger child
    assert "bottleneck" in rows.nth(11).locator("td").nth(2).text_content()
    indent = page.evaluate(
        "[...document.querySelectorAll('#tree tr td:first-child')].map(td => td.style.paddingLeft)"
    )
    assert indent[0] != indent[1]  # level 2 is indented under level 1
    assert page.locator("#topdown-cpu").text_content() == "amdzen4"
    shot(page, "run-topdown")
