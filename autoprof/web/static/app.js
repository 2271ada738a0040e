// autoprof serve: page behaviour. User-controlled text is only ever set with textContent.
"use strict";
const DATA = JSON.parse(document.getElementById("page-data").textContent);
const PAGE = document.body.dataset.page;
const LAYOUT = { margin: { l: 70, r: 20, t: 30, b: 50 }, hovermode: "closest", dragmode: "zoom" };

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

function token() {
  const field = document.getElementById("token");
  return (field && field.value) || sessionStorage.getItem("autoprof-token") || "";
}

// JSON API call; a 403 asking for the token prompts for it once and retries.
async function api(method, url, body, retried) {
  const headers = { "Content-Type": "application/json" };
  if (token()) headers["X-Autoprof-Token"] = token();
  const response = await fetch(url, {
    method, headers, credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await response.json().catch(() => ({}));
  if (response.status === 403 && !retried && /token/.test(data.error || "")) {
    const given = window.prompt("Token (printed by autoprof serve):");
    if (given) {
      sessionStorage.setItem("autoprof-token", given);
      return api(method, url, body, true);
    }
  }
  if (!response.ok) throw new Error(data.error || response.statusText);
  return data;
}

function fmt(value) {
  if (value === null || value === undefined) return "-";
  if (typeof value === "number") return Number.isInteger(value) ? value.toLocaleString() : value.toPrecision(4);
  return String(value);
}

function table(rows, columns) {
  const t = el("table");
  const head = t.createTHead().insertRow();
  columns.forEach((c) => head.appendChild(el("th", c)));
  const body = t.createTBody();
  rows.forEach((row) => {
    const tr = body.insertRow();
    columns.forEach((c) => tr.appendChild(el("td", fmt(row[c]))));
  });
  return t;
}

function initRuns() {
  document.querySelectorAll("button.delete").forEach((button) => {
    button.addEventListener("click", async () => {
      const run = button.dataset.run;
      if (!window.confirm(`Delete run ${run} and all its measurements?`)) return;
      try {
        await api("DELETE", `/api/runs/${encodeURIComponent(run)}`);
        button.closest("tr").remove();
      } catch (err) {
        window.alert(`Not deleted: ${err.message}`);
      }
    });
  });
  const picks = document.querySelectorAll("input.pick");
  const compare = document.getElementById("compare-selected");
  const chosen = () => [...picks].filter((p) => p.checked).map((p) => p.value);
  picks.forEach((p) => p.addEventListener("change", () => { compare.disabled = chosen().length !== 2; }));
  compare.addEventListener("click", () => {
    const [a, b] = chosen();
    window.location = `/compare?a=${encodeURIComponent(a)}&b=${encodeURIComponent(b)}`;
  });
}

async function plotSeries(events) {
  const runId = encodeURIComponent(DATA.id);
  const found = await Promise.all(events.map((e) =>
    api("GET", `/api/runs/${runId}/series?event=${encodeURIComponent(e)}`)));
  const traces = [];
  found.forEach((s, i) => s.lines.forEach((line) => traces.push({
    x: line.x, y: line.y, name: `${s.event} · ${line.name}`, mode: "lines+markers",
    marker: { size: 4 }, yaxis: i === 0 ? "y" : "y2", type: "scatter",
  })));
  const layout = { ...LAYOUT, title: { text: events.join(" vs ") }, xaxis: { title: { text: "time (s)" } },
    yaxis: { title: { text: found[0].unit || "count per interval" } }, showlegend: true,
    legend: { orientation: "h", y: -0.25 } };
  if (found.length > 1) layout.yaxis2 = { overlaying: "y", side: "right", title: { text: found[1].event } };
  const target = document.getElementById("series");
  target.replaceChildren();
  Plotly.newPlot(target, traces, layout, { responsive: true, scrollZoom: true });
  const h = found[0].histogram;
  const centers = h.edges.slice(0, -1).map((e, i) => (e + h.edges[i + 1]) / 2);
  const hist = document.getElementById("histogram");
  hist.replaceChildren();
  Plotly.newPlot(hist, [{ x: centers, y: h.counts, type: "bar", name: found[0].event }],
    { ...LAYOUT, title: { text: `${found[0].event}: intervals by count` },
      xaxis: { title: { text: "count per interval" } }, yaxis: { title: { text: "intervals" } } },
    { responsive: true });
}

async function initRun() {
  const search = document.getElementById("event-search");
  const rows = [...document.querySelectorAll("table.events tbody tr")];
  search.addEventListener("input", () => {
    const q = search.value.trim().toLowerCase();
    rows.forEach((r) => { r.hidden = q !== "" && !r.dataset.search.includes(q); });
  });
  document.querySelectorAll("button.plot").forEach((b) =>
    b.addEventListener("click", () => plotSeries([b.dataset.event]).catch(showError("series"))));
  api("GET", `/api/runs/${encodeURIComponent(DATA.id)}/metrics`).then(showTree).catch(showError("tree"));
  try {
    const analysis = await api("GET", `/api/runs/${encodeURIComponent(DATA.id)}/analysis`);
    fillEventTable(analysis.stats);
    const stats = document.getElementById("stats");
    stats.replaceChildren(analysis.stats.length ? table(analysis.stats,
      ["event", "pmu", "unit", "runs", "repeats", "rows", "samples", "intervals", "total", "mean", "cv", "min_percent_running"])
      : el("p", "no stats"));
    ["regions", "threads"].forEach((kind) => {  // side by side: the whole program and each
      const sides = analysis[kind];
      if (!sides) return;
      document.getElementById(`${kind}-table`).replaceChildren(table(sides.rows, sides.columns));
      document.getElementById(kind).hidden = false;
    });
    const heat = document.getElementById("heatmap");
    heat.replaceChildren();
    const c = analysis.correlation;
    if (c.error) { heat.appendChild(el("p", c.error, "hint")); return; }
    Plotly.newPlot(heat, [{ z: c.matrix, x: c.events, y: c.events, type: "heatmap", zmin: -1, zmax: 1,
      colorscale: c.colorscale, hovertemplate: "%{x}<br>%{y}<br>r = %{z}<extra></extra>" }],
      { ...LAYOUT, title: { text: `${c.method}, ${c.intervals} intervals` }, height: 300 + 12 * c.events.length,
        xaxis: { automargin: true }, yaxis: { automargin: true, autorange: "reversed" } }, { responsive: true });
    heat.on("plotly_click", (ev) => {
      const p = ev.points[0];
      plotSeries(p.x === p.y ? [p.x] : [p.x, p.y]).catch(showError("series"));
    });
  } catch (err) {
    showError("heatmap")(err);
  }
}

// the top-down tree of `analyze metrics`: one row per node, indented by depth, the bottleneck
// path in bold with its last node marked
function showTree(metrics) {
  const target = document.getElementById("tree");
  if (metrics.error) { target.replaceChildren(el("p", metrics.error, "hint")); return; }
  document.getElementById("topdown-cpu").textContent = metrics.cpu;
  const t = el("table", undefined, "tree");
  const body = t.createTBody();
  metrics.tree.forEach((row) => {
    const tr = body.insertRow();
    tr.className = [row.group ? "group" : "", row.path ? "path" : ""].join(" ").trim();
    const name = el("td", row.group ? `[${row.name}]` : row.name);
    name.style.paddingLeft = `${0.4 + 1.5 * row.depth}em`;
    tr.appendChild(name);
    tr.appendChild(el("td", row.value, "num"));
    const notes = [row.bottleneck ? "<== bottleneck" : "", row.crossed ? "above threshold" : "",
      row.scope === "cross-run" ? "cross-run" : "", row.flag ? `! ${row.flag}` : ""];
    tr.appendChild(el("td", notes.filter(Boolean).join(" · "), row.flag ? "flag" : ""));
  });
  const notes = el("ul", undefined, "hint");
  metrics.notes.forEach((n) => notes.appendChild(el("li", n)));
  target.replaceChildren(metrics.tree.length ? t : el("p", "no tree metric could be computed", "hint"), notes);
}

// the event table's totals come with the stats (the page opens without reading measurements)
function fillEventTable(stats) {
  const byEvent = new Map(stats.map((row) => [row.event, row]));
  document.querySelectorAll("table.events tbody tr").forEach((tr) => {
    const row = byEvent.get(tr.dataset.event);
    if (!row) return;
    tr.querySelector(".total").textContent = fmt(row.total);
    tr.querySelector(".mean").textContent = fmt(row.mean);
    tr.querySelector(".cv").textContent = fmt(row.cv);
    tr.querySelector(".running").textContent = fmt(row.min_percent_running);
  });
}

function showError(id) {
  return (err) => document.getElementById(id).replaceChildren(el("p", err.message, "error"));
}

function initCompare() {
  if (!DATA.rows || !DATA.rows.length) return;
  const rows = DATA.rows.filter((r) => r.log2_ratio !== null).slice(0, 30).reverse();
  Plotly.newPlot("compare-chart", [{ type: "bar", orientation: "h", y: rows.map((r) => r.event),
    x: rows.map((r) => r.log2_ratio), marker: { color: rows.map((r) => (r.significant ? "#c0392b" : "#95a5a6")) } }],
    { ...LAYOUT, title: { text: "log2(B/A), significant in red" }, height: 200 + 22 * rows.length,
      yaxis: { automargin: true } }, { responsive: true });
}

async function initNew() {
  const chosen = new Set(DATA.events || []);
  const list = document.getElementById("event-list");
  const filter = document.getElementById("event-filter");
  const count = document.getElementById("chosen-count");
  const events = await api("GET", "/api/events");
  const render = () => {
    const q = filter.value.trim().toLowerCase();
    const shown = events.filter((e) => chosen.has(e.name) || !q ||
      e.name.toLowerCase().includes(q) || (e.description || "").toLowerCase().includes(q)).slice(0, 300);
    list.replaceChildren(...shown.map((e) => {
      const label = el("label", null, "event");
      const box = el("input");
      box.type = "checkbox"; box.value = e.name; box.checked = chosen.has(e.name);
      box.addEventListener("change", () => { box.checked ? chosen.add(e.name) : chosen.delete(e.name); count.textContent = `${chosen.size} chosen`; });
      label.append(box, el("span", e.name, "name"), el("span", e.pmu, "pmu"));
      if (e.used) label.appendChild(el("span", `used in ${e.used}`, "used"));
      if (e.description) label.appendChild(el("span", e.description, "desc"));
      return label;
    }));
    count.textContent = `${chosen.size} chosen`;
  };
  filter.addEventListener("input", render);
  render();
  document.getElementById("job-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const form = new FormData(ev.target);
    const body = Object.fromEntries(["tool", "command", "env", "pid", "duration", "interval_ms", "repeat", "tags",
      "regions", "pin", "core_type"].map((k) => [k, form.get(k)]));
    body.per_thread = form.get("per_thread") === "on";
    body.emulate = form.get("emulate") === "on";
    body.pid = body.pid ? Number(body.pid) : null;
    body.events = [...chosen];
    const error = document.getElementById("form-error");
    error.textContent = "";
    try {
      const job = await api("POST", "/api/jobs", body);
      window.location = `/jobs/${job.id}`;
    } catch (err) {
      error.textContent = err.message;
    }
  });
}

function initJob() {
  const target = document.getElementById("live");
  const traces = new Map();
  let points = 0;
  Plotly.newPlot(target, [], { ...LAYOUT, title: { text: "live intervals" }, xaxis: { title: { text: "time (s)" } },
    yaxis: { title: { text: "count per interval" } }, showlegend: true }, { responsive: true });
  const stream = new EventSource(`/api/jobs/${encodeURIComponent(DATA.id)}/stream`);
  stream.addEventListener("points", (ev) => {
    const batch = JSON.parse(ev.data);
    const byTrace = new Map();
    batch.forEach((p) => {
      const key = `${p.event} · ${p.run}`;
      if (!traces.has(key)) {
        traces.set(key, traces.size);
        Plotly.addTraces(target, { x: [], y: [], name: key, mode: "lines+markers", marker: { size: 4 } });
      }
      if (!byTrace.has(key)) byTrace.set(key, { x: [], y: [] });
      byTrace.get(key).x.push(p.t);
      byTrace.get(key).y.push(p.v);
    });
    const keys = [...byTrace.keys()];
    Plotly.extendTraces(target, { x: keys.map((k) => byTrace.get(k).x), y: keys.map((k) => byTrace.get(k).y) },
      keys.map((k) => traces.get(k)));
    points += batch.length;
    document.getElementById("points").textContent = points;
  });
  stream.addEventListener("tails", (ev) => {
    const t = JSON.parse(ev.data);
    ["stdout", "stderr", "log"].forEach((k) => { document.getElementById(k).textContent = t[k]; });
    const state = document.getElementById("state");
    state.textContent = t.state; state.className = `state-${t.state}`;
  });
  stream.addEventListener("end", (ev) => {
    stream.close();
    const job = JSON.parse(ev.data);
    document.getElementById("state").textContent = job.state;
    document.getElementById("stop").disabled = true;
    document.getElementById("job-error").textContent = job.error || "";
    if (job.state === "done" && job.run_id) window.location = `/runs/${job.run_id}`;
    else if (job.state === "done" && DATA.tool === "record") window.location = `/records/${job.id}`;
  });
  document.getElementById("stop").addEventListener("click", async () => {
    try { await api("POST", `/api/jobs/${encodeURIComponent(DATA.id)}/stop`); } catch (err) {
      document.getElementById("job-error").textContent = err.message;
    }
  });
}

const INIT = { runs: initRuns, run: initRun, compare: initCompare, new: initNew, job: initJob };
if (INIT[PAGE]) INIT[PAGE]();
