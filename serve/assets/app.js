// ralph serve: the page. Plain DOM and SVG, no framework. The server lays
// the graph out (x, y per task); this file draws it, keeps it live through
// the event stream (/api/events) and renders the other views.
"use strict";

(() => {
  const NODE_W = 200, NODE_H = 28;
  const LIST_DEFAULT_ABOVE = 2000; // tasks: the list is the default view above this
  const HIDE_DONE_ABOVE = 300; // tasks: hide-done is checked by default above this
  const ROW_H = 28;
  const SVGNS = "http://www.w3.org/2000/svg";

  const $ = (sel, root = document) => root.querySelector(sel);
  const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  const statusWord = { pending: "open", in_progress: "active", done: "done", failed: "failed", blocked: "blocked" };
  const money = (v) => "$" + (v || 0).toFixed(4);

  const state = {
    plan: null, // /api/plan
    byId: new Map(),
    run: { sessions: [], workers: [] },
    workers: new Map(), // name -> worker object
    receipts: [],
    route: { view: "graph", id: "" },
    hideDoneTouched: false,
    view: { x: 20, y: 20, k: 1, fitted: false },
    listRows: [],
  };

  // ---- fetching, coalesced ------------------------------------------------

  // coalesced(fn) returns a trigger: calls made while fn runs lead to one
  // more run after it, never to several at once.
  function coalesced(fn) {
    let running = false, again = false;
    const trigger = async () => {
      if (running) { again = true; return; }
      running = true;
      try { await fn(); } catch (e) { console.error(e); }
      running = false;
      if (again) { again = false; trigger(); }
    };
    return trigger;
  }

  async function getJSON(url) {
    const r = await fetch(url, { credentials: "same-origin", cache: "no-store" });
    if (!r.ok) {
      let msg = url + ": " + r.status;
      try { msg = (await r.json()).error || msg; } catch { /* not JSON */ }
      const err = new Error(msg);
      err.status = r.status;
      if (r.status === 503) showStoreError(msg);
      throw err;
    }
    showStoreError("");
    return r.json();
  }

  // showStoreError says, above everything, that the plan's store does not
  // answer (a 503 from the API); "" takes the words away.
  function showStoreError(msg) {
    const el = $("#store-error");
    el.hidden = !msg;
    el.textContent = msg ? "The plan's store does not answer: " + msg + ". The page shows what it last read, and tries again." : "";
  }

  const refreshPlan = coalesced(async () => {
    const plan = await getJSON("/api/plan");
    state.plan = plan;
    state.byId = new Map(plan.tasks.map((t) => [t.id, t]));
    renderCounts();
    renderLastRun();
    if (state.route.view === "runs") refreshRuns();
    renderFeatures();
    if (!state.hideDoneTouched) $("#hide-done").checked = plan.tasks.length > HIDE_DONE_ABOVE;
    renderDashboard();
  });
  // runEvents counts the `run` events received: a snapshot of /api/run
  // fetched while one arrived may be older than it (a worker that ended
  // would come back), so it is dropped and fetched again.
  let runEvents = 0;
  const refreshRun = coalesced(async () => {
    const seen = runEvents;
    const run = await getJSON("/api/run");
    if (runEvents !== seen) { refreshRun(); return; }
    state.run = run;
    state.workers = new Map(state.run.workers.map((w) => [w.worker, w]));
    renderWorkers();
  });
  const refreshRuns = coalesced(async () => {
    renderRuns((await getJSON("/api/runs")).runs);
  });
  const refreshReceipts = coalesced(async () => {
    state.receipts = (await getJSON("/api/receipts")).receipts;
    renderCharts();
    if (state.route.view === "task") refreshTask();
  });
  const refreshTask = coalesced(async () => {
    if (state.route.view !== "task") return;
    const id = state.route.id;
    let data;
    try {
      data = await getJSON("/api/task/" + encodeURIComponent(id));
    } catch (e) {
      if (e.status === 404) { $("#task").innerHTML = `<p class="empty">No task ${esc(id)} in the plan.</p>`; $("#task").dataset.id = id; return; }
      throw e;
    }
    if (state.route.view === "task" && state.route.id === id) renderTask(data);
  });

  // ---- the event stream ---------------------------------------------------

  let backoff = 1000;
  function connect() {
    const live = $("#live");
    const es = new EventSource("/api/events");
    es.onopen = () => {
      live.dataset.state = "connected";
      backoff = 1000;
      // Whatever happened while the stream was down is read again.
      refreshPlan(); refreshRun(); refreshReceipts();
      if (state.route.view === "task") refreshTask();
    };
    es.addEventListener("plan", () => {
      refreshPlan();
      if (state.route.view === "task") refreshTask();
      refreshRun();
    });
    es.addEventListener("receipts", () => refreshReceipts());
    es.addEventListener("run", (ev) => {
      let w;
      try { w = JSON.parse(ev.data); } catch { return; }
      runEvents++;
      if (w.ended) state.workers.delete(w.worker);
      else state.workers.set(w.worker, w);
      renderWorkers();
    });
    es.onerror = () => {
      es.close();
      live.dataset.state = "reconnecting";
      setTimeout(connect, backoff);
      backoff = Math.min(backoff * 2, 30000);
    };
  }

  // ---- routing ------------------------------------------------------------

  function parseRoute() {
    const h = location.hash || "#/";
    if (h.startsWith("#/task/")) return { view: "task", id: decodeURIComponent(h.slice(7)) };
    if (h.startsWith("#/list")) return { view: "list", id: "" };
    if (h.startsWith("#/runs")) return { view: "runs", id: "" };
    return { view: "graph", id: "" };
  }

  function route() {
    state.route = parseRoute();
    const onTask = state.route.view === "task", onRuns = state.route.view === "runs";
    $("#dashboard").hidden = onTask || onRuns;
    $("#task-page").hidden = !onTask;
    $("#runs-page").hidden = !onRuns;
    for (const a of document.querySelectorAll("nav a")) a.classList.toggle("on", a.dataset.route === state.route.view);
    if (onTask) {
      $("#task").innerHTML = `<p class="empty">Loading ${esc(state.route.id)}…</p>`;
      refreshTask();
    } else if (onRuns) {
      refreshRuns();
    } else {
      renderDashboard();
    }
  }

  // ---- header ---------------------------------------------------------------

  function renderCounts() {
    const c = state.plan.counts;
    for (const el of document.querySelectorAll("#counts [data-count]")) el.textContent = String(c[el.dataset.count] ?? 0);
    document.title = `ralph · ${c.done}/${c.total} done`;
  }

  function renderFeatures() {
    const sel = $("#filter-feature");
    const want = ["", ...state.plan.features];
    const have = [...sel.options].map((o) => o.value);
    if (want.join("\n") === have.join("\n")) return;
    const cur = sel.value;
    sel.innerHTML = `<option value="">any feature</option>` + state.plan.features.map((f) => `<option value="${esc(f)}">${esc(f)}</option>`).join("");
    sel.value = cur;
  }

  // ---- runs: the last one above every view, all of them in #/runs ------------------

  // runOutcome is how a run ended, as a person reads it.
  function runOutcome(r) {
    if (r.outcome === "running") return `running (pid ${r.pid} on ${r.host})`;
    if (r.outcome === "died") return "died (killed, or crashed: no exit code)";
    return r.outcome.replaceAll("_", " ") + (r.exit_code === null ? "" : ` · exit ${r.exit_code}`);
  }

  // runClass sorts outcomes into good, bad, running, for colour.
  function runClass(r) {
    if (r.outcome === "running") return "running";
    return r.outcome === "complete" ? "good" : "bad";
  }

  function ago(s) {
    const d = Math.max(0, (Date.now() - new Date(s).getTime()) / 1000);
    if (d < 90) return Math.round(d) + " s ago";
    if (d < 5400) return Math.round(d / 60) + " min ago";
    if (d < 129600) return Math.round(d / 3600) + " h ago";
    return Math.round(d / 86400) + " days ago";
  }

  function took(r) {
    if (!r.ended_at) return r.outcome === "running" ? "running" : "";
    const s = (new Date(r.ended_at) - new Date(r.started_at)) / 1000;
    return s < 90 ? s.toFixed(1) + " s" : s < 5400 ? Math.round(s / 60) + " min" : (s / 3600).toFixed(1) + " h";
  }

  function renderLastRun() {
    const el = $("#last-run"), r = state.plan.last_run;
    el.hidden = !r;
    if (!r) return;
    el.dataset.outcome = r.outcome;
    el.className = runClass(r);
    const at = r.ended_at ? "ended " + ago(r.ended_at) : "started " + ago(r.started_at);
    el.innerHTML = `<a href="#/runs">last run</a>: ${esc(r.kind)} <b>${esc(runOutcome(r))}</b> · ${r.done} done, ${r.failed} failed, ${r.remaining} remain · ${money(r.cost_usd)} over ${r.agents} agent sessions · ${esc(at)}`;
  }

  function renderRuns(runs) {
    const body = $("#runs tbody");
    $("#runs").dataset.rows = String(runs.length);
    body.innerHTML = runs.length ? runs.map((r) => `<tr data-id="${r.id}" data-outcome="${esc(r.outcome)}" class="${runClass(r)}"><td class="num">${r.id}</td><td>${esc(r.kind)}</td>` +
      `<td>${esc(r.outcome.replaceAll("_", " "))}</td><td class="num">${r.exit_code === null ? "–" : r.exit_code}</td><td class="num">${r.done}</td><td class="num">${r.failed}</td>` +
      `<td class="num">${r.remaining}</td><td class="num">${r.agents}</td><td class="ran-on">${esc((r.agent_names || []).join(", "))}</td><td class="num">${money(r.cost_usd)}</td><td>${esc(when(r.started_at))}</td><td>${esc(took(r))}</td>` +
      `<td title="${esc(r.holder)}">pid ${r.pid}</td><td><code>${esc((r.integration_tip || "").slice(0, 12))}</code></td></tr>`).join("")
      : `<tr><td colspan="14" class="empty">No run yet.</td></tr>`;
  }

  // ---- dashboard: graph or list -------------------------------------------------

  function renderDashboard() {
    if (!state.plan || state.route.view === "task" || state.route.view === "runs") return;
    const big = state.plan.tasks.length > LIST_DEFAULT_ABOVE;
    const list = state.route.view === "list" || big;
    $("#graph-panel").hidden = list;
    $("#list-panel").hidden = !list;
    if (list) renderList();
    else drawGraph();
  }

  // hiddenDone: done tasks whose dependents (tasks they block, children)
  // are all done.
  function hiddenDone(tasks) {
    const dependents = new Map();
    const add = (from, to) => { if (!dependents.has(from)) dependents.set(from, []); dependents.get(from).push(to); };
    for (const t of tasks) {
      for (const b of t.blocked_by) add(b, t);
      if (t.parent_id) add(t.parent_id, t);
    }
    const hidden = new Set();
    for (const t of tasks) {
      if (t.status !== "done") continue;
      if ((dependents.get(t.id) || []).every((d) => d.status === "done")) hidden.add(t.id);
    }
    return hidden;
  }

  function drawGraph() {
    const plan = state.plan;
    const svg = $("#graph");
    const vp = $("#viewport");
    const hide = $("#hide-done").checked ? hiddenDone(plan.tasks) : new Set();
    const shown = plan.tasks.filter((t) => !hide.has(t.id));
    const note = $("#graph-note");
    note.hidden = plan.tasks.length > 0;
    note.textContent = "The plan has no tasks yet: 'ralph plan' or 'ralph task add' makes some.";
    const parts = [];
    // Edges first, under the nodes.
    for (const t of shown) {
      for (const b of t.blocked_by) {
        const f = state.byId.get(b);
        if (!f || hide.has(b)) continue;
        const hot = t.ready ? " hot" : "";
        parts.push(`<path class="edge${hot}" data-from="${esc(b)}" data-to="${esc(t.id)}" data-kind="blocker" d="${curve(f, t)}"/>`);
      }
      if (t.parent_id) {
        const p = state.byId.get(t.parent_id);
        if (p && !hide.has(p.id)) parts.push(`<path class="edge" data-from="${esc(p.id)}" data-to="${esc(t.id)}" data-kind="parent" d="${curve(p, t)}"/>`);
      }
    }
    if (hide.size > 0) {
      parts.push(`<g class="collapsed" data-count="${hide.size}" transform="translate(${-NODE_W - 60},0)"><rect width="${NODE_W}" height="${NODE_H}" rx="4"/><text x="10" y="18">${hide.size} done</text></g>`);
    }
    for (const t of shown) {
      const label = t.title || t.id;
      const active = t.status === "in_progress" && t.holder;
      const ty = active ? 12 : 18;
      const stale = t.stale ? ` data-stale="${esc(t.stale)}"` : "";
      let g = `<g class="node" data-id="${esc(t.id)}" data-status="${esc(t.status)}" data-ready="${t.ready ? "true" : "false"}"${stale} transform="translate(${t.x},${t.y})">` +
        `<title>${esc(t.id)} · ${esc(statusWord[t.status] || t.status)}${t.ready ? " · ready" : ""}${t.stale ? " · claim stale: " + esc(t.stale) : ""}\n${esc(label)}</title>` +
        `<rect class="box" width="${NODE_W}" height="${NODE_H}" rx="4"/><rect class="bar" width="5" height="${NODE_H}" rx="2"/>` +
        `<text x="11" y="${ty}">${esc(clip(label, 30))}</text>`;
      if (active) g += `<text class="holder" x="11" y="24">${esc(clip((t.stale ? t.stale + ": " : "") + t.holder, 38))}</text>`;
      parts.push(g + "</g>");
    }
    vp.innerHTML = parts.join("");
    if (!state.view.fitted && shown.length > 0) fit();
    applyView();
    svg.dataset.version = plan.version;
    performance.mark("ralph:graph-drawn");
  }

  function curve(a, b) {
    let x1 = a.x + NODE_W, y1 = a.y + NODE_H / 2, x2 = b.x, y2 = b.y + NODE_H / 2;
    if (x2 < x1) { x1 = a.x + NODE_W / 2; x2 = b.x + NODE_W / 2; y1 = a.y + NODE_H; y2 = b.y; }
    const dx = Math.max(30, Math.abs(x2 - x1) / 2);
    return `M${x1},${y1}C${x1 + dx},${y1} ${x2 - dx},${y2} ${x2},${y2}`;
  }

  function clip(s, n) { s = String(s); return s.length > n ? s.slice(0, n - 1) + "…" : s; }

  // ---- pan and zoom -------------------------------------------------------------

  function applyView() {
    const v = state.view;
    $("#viewport").setAttribute("transform", `translate(${v.x},${v.y}) scale(${v.k})`);
  }

  function fit(all) {
    const svg = $("#graph");
    const w = svg.clientWidth || 800, h = svg.clientHeight || 600;
    let minX = 0, minY = 0, maxX = 0, maxY = 0;
    for (const t of state.plan.tasks) {
      minX = Math.min(minX, t.x); minY = Math.min(minY, t.y);
      maxX = Math.max(maxX, t.x + NODE_W); maxY = Math.max(maxY, t.y + NODE_H);
    }
    if ($("#hide-done").checked) minX = Math.min(minX, -NODE_W - 60);
    const k = Math.max(0.05, Math.min(1, (w - 40) / (maxX - minX || 1), (h - 40) / (maxY - minY || 1)));
    state.view = { x: 20 - minX * k, y: 20 - minY * k, k, fitted: true };
    if (k < 0.35 && !all) {
      // Too big to read whole: start readable, at the frontier (the
      // first ready or active task's layer); "fit" shows it all.
      const front = state.plan.tasks.filter((t) => t.ready || t.status === "in_progress").reduce((m, t) => Math.min(m, t.x), Infinity);
      const k2 = 0.6;
      const x0 = Number.isFinite(front) ? Math.max(minX, front - NODE_W) : minX;
      state.view = { x: 20 - x0 * k2, y: 20 - minY * k2, k: k2, fitted: true };
    }
    applyView();
  }

  function zoomAt(px, py, factor) {
    const v = state.view;
    const k = Math.max(0.05, Math.min(4, v.k * factor));
    v.x = px - (px - v.x) * (k / v.k);
    v.y = py - (py - v.y) * (k / v.k);
    v.k = k;
    applyView();
  }

  function setupPanZoom() {
    const svg = $("#graph");
    let drag = null;
    svg.addEventListener("wheel", (e) => {
      e.preventDefault();
      const r = svg.getBoundingClientRect();
      zoomAt(e.clientX - r.left, e.clientY - r.top, Math.exp(-e.deltaY * 0.0015));
    }, { passive: false });
    svg.addEventListener("pointerdown", (e) => {
      drag = { x: e.clientX, y: e.clientY, vx: state.view.x, vy: state.view.y, moved: false };
    });
    window.addEventListener("pointermove", (e) => {
      if (!drag) return;
      const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
      if (!drag.moved && Math.abs(dx) + Math.abs(dy) < 4) return;
      drag.moved = true;
      svg.classList.add("dragging");
      state.view.x = drag.vx + dx; state.view.y = drag.vy + dy;
      applyView();
    });
    window.addEventListener("pointerup", () => {
      if (drag && drag.moved) { svg.classList.remove("dragging"); svg.dataset.justDragged = "1"; setTimeout(() => delete svg.dataset.justDragged, 0); }
      drag = null;
    });
    svg.addEventListener("click", (e) => {
      if (svg.dataset.justDragged) return;
      const g = e.target.closest("g.node");
      if (g) location.hash = "#/task/" + encodeURIComponent(g.dataset.id);
      else if (e.target.closest("g.collapsed")) { $("#hide-done").checked = false; state.hideDoneTouched = true; drawGraph(); }
    });
    const center = (f) => { const r = svg.getBoundingClientRect(); zoomAt(r.width / 2, r.height / 2, f); };
    $("#zoom-in").addEventListener("click", () => center(1.25));
    $("#zoom-out").addEventListener("click", () => center(0.8));
    $("#zoom-fit").addEventListener("click", () => fit(true));
    $("#hide-done").addEventListener("change", () => { state.hideDoneTouched = true; state.view.fitted = false; drawGraph(); });
  }

  // ---- the list, virtualised ----------------------------------------------------

  function filteredTasks() {
    const st = $("#filter-status").value, fe = $("#filter-feature").value;
    const text = $("#filter-text").value.trim().toLowerCase();
    const ready = $("#filter-ready").checked;
    return state.plan.tasks.filter((t) =>
      (!st || t.status === st) && (!fe || t.feature === fe) && (!ready || t.ready) &&
      (!text || t.id.toLowerCase().includes(text) || t.title.toLowerCase().includes(text)));
  }

  function renderList() {
    state.listRows = filteredTasks();
    $("#task-list").dataset.rows = String(state.listRows.length);
    renderRows();
  }

  function renderRows() {
    const scroll = $("#list-scroll");
    const rows = state.listRows;
    const head = ROW_H; // the sticky header
    const first = Math.max(0, Math.floor((scroll.scrollTop - head) / ROW_H) - 10);
    const count = Math.ceil((scroll.clientHeight || 800) / ROW_H) + 20;
    const last = Math.min(rows.length, first + count);
    const out = [];
    // Spacers keep the scroll height; their heights are set through the
    // CSSOM below (the CSP allows no style attributes in markup).
    if (first > 0) out.push(`<tr class="pad"><td colspan="6" data-h="${first * ROW_H}"></td></tr>`);
    for (let i = first; i < last; i++) {
      const t = rows[i];
      const ready = (t.ready ? ` <span class="badge ready">ready</span>` : "") + (t.stale ? ` <span class="badge stale">${esc(t.stale)}</span>` : "");
      out.push(`<tr data-id="${esc(t.id)}" data-status="${esc(t.status)}"><td>${esc(t.id)}</td><td title="${esc(t.title)}">${esc(t.title)}</td>` +
        `<td><span class="badge s-${esc(t.status)}">${esc(statusWord[t.status] || t.status)}</span>${ready}</td><td>${t.priority}</td>` +
        `<td>${esc(t.feature || "")}</td><td>${esc(t.holder || "")}</td></tr>`);
    }
    if (last < rows.length) out.push(`<tr class="pad"><td colspan="6" data-h="${(rows.length - last) * ROW_H}"></td></tr>`);
    const tbody = $("#task-list tbody");
    tbody.innerHTML = out.join("");
    for (const td of tbody.querySelectorAll("td[data-h]")) td.style.height = td.dataset.h + "px";
  }

  function setupList() {
    let pending = false;
    $("#list-scroll").addEventListener("scroll", () => {
      if (pending) return;
      pending = true;
      requestAnimationFrame(() => { pending = false; renderRows(); });
    });
    for (const id of ["#filter-status", "#filter-feature", "#filter-ready"]) $(id).addEventListener("change", () => { $("#list-scroll").scrollTop = 0; renderList(); });
    $("#filter-text").addEventListener("input", () => { $("#list-scroll").scrollTop = 0; renderList(); });
    $("#task-list tbody").addEventListener("click", (e) => {
      const tr = e.target.closest("tr[data-id]");
      if (tr) location.hash = "#/task/" + encodeURIComponent(tr.dataset.id);
    });
  }

  // ---- workers --------------------------------------------------------------------

  function elapsed(since) {
    if (!since) return "";
    let s = Math.max(0, Math.floor((Date.now() - Date.parse(since)) / 1000));
    const h = Math.floor(s / 3600); s -= h * 3600;
    const m = Math.floor(s / 60); s -= m * 60;
    return (h ? h + "h " : "") + (h || m ? m + "m " : "") + s + "s";
  }

  function eventText(e) {
    if (e.kind === "tool_use") return (e.tool || "tool") + (e.input ? ": " + e.input : "");
    if (e.kind === "init") return "— session started —";
    // A result repeats the agent's last text; only an error's is news.
    if (e.kind === "result" && !e.is_error) return "— session ended —";
    return e.text || e.kind;
  }

  // The steps after an agent's session, as a worker's card names them.
  const phaseWord = { verify: "verifying", gate: "running the gates", integrate: "integrating" };

  function renderWorkers() {
    const box = $("#workers");
    const ws = [...state.workers.values()];
    if (ws.length === 0) { box.innerHTML = `<p class="empty">No run under way.</p>`; return; }
    box.innerHTML = ws.map((w) => {
      const task = w.task ? `<a class="task" data-task-id="${esc(w.task.id)}" href="#/task/${encodeURIComponent(w.task.id)}">${esc(w.task.id)} · ${esc(w.task.title || "")}</a>` : `<span class="task empty">between tasks</span>`;
      const wait = w.wait ? `<div class="wait" data-until="${esc(w.wait.until || "")}">${w.wait.until ? "waiting for the usage limit's reset at " + esc(new Date(w.wait.until).toLocaleString()) : "waiting"}${w.wait.message ? " — " + esc(w.wait.message) : ""}</div>` : "";
      const holder = w.holder ? `<div class="holder">held by ${esc(w.holder)}</div>` : "";
      const stale = w.stale ? `<div class="stale" data-stale="${esc(w.stale)}">claim stale (${esc(w.stale)}): the next ralph command on this plan returns it to pending</div>` : "";
      const phase = w.phase ? `<div class="phase" data-phase="${esc(w.phase)}">${esc(phaseWord[w.phase] || w.phase)}…</div>` : "";
      const events = (w.events || []).map((e) => `<li data-kind="${esc(e.kind)}"${e.is_error ? ' class="error"' : ""} title="${esc(eventText(e))}">${esc(eventText(e))}</li>`).join("");
      return `<div class="worker" data-worker="${esc(w.worker)}"><header><span class="name">${esc(w.worker)}</span>` +
        `<span class="model">${esc(w.model || "")}</span><span class="elapsed" data-since="${esc(w.started_at || "")}">${elapsed(w.started_at)}</span></header>` +
        task + phase + wait + holder + stale + `<ul class="events">${events}</ul></div>`;
    }).join("");
    for (const ul of box.querySelectorAll(".events")) ul.scrollTop = ul.scrollHeight;
  }

  function tickElapsed() {
    for (const el of document.querySelectorAll(".worker .elapsed[data-since]")) el.textContent = elapsed(el.dataset.since);
  }

  // ---- charts ------------------------------------------------------------------------

  const CW = 340, CH = 110, PAD = 22;

  function barChart(name, values, opts = {}) {
    const max = Math.max(...values.map((v) => v.value), 0) || 1;
    const n = values.length || 1;
    const bw = (CW - PAD) / n;
    const bars = values.map((v, i) => {
      const h = (v.value / max) * (CH - PAD - 14);
      return `<rect class="bar${v.cls ? " " + v.cls : ""}" x="${(PAD + i * bw).toFixed(1)}" y="${(CH - PAD - h + 4).toFixed(1)}" width="${Math.max(1, bw - 1).toFixed(1)}" height="${h.toFixed(1)}"><title>${esc(v.label)}: ${esc(opts.fmt ? opts.fmt(v.value) : v.value)}</title></rect>`;
    }).join("");
    return `<h3>${esc(opts.title)}</h3><svg class="chart" data-chart="${name}" viewBox="0 0 ${CW} ${CH}" xmlns="${SVGNS}">` +
      `<line class="axis" x1="${PAD}" y1="${CH - PAD + 4}" x2="${CW}" y2="${CH - PAD + 4}"/>` +
      `<text x="0" y="10">${esc(opts.fmt ? opts.fmt(max) : max)}</text>${bars}</svg>`;
  }

  function hbarChart(name, entries, title) {
    const max = Math.max(...entries.map((e) => e[1]), 0) || 1;
    const rowH = 18, h = Math.max(rowH, entries.length * rowH) + 4;
    const rows = entries.map(([label, v], i) => {
      const w = (v / max) * (CW - 200);
      return `<text x="0" y="${i * rowH + 13}">${esc(clip(label || "(none)", 22))}</text>` +
        `<rect class="bar" x="130" y="${i * rowH + 3}" width="${Math.max(1, w).toFixed(1)}" height="${rowH - 6}"><title>${esc(label)}: ${money(v)}</title></rect>` +
        `<text x="${(134 + w).toFixed(1)}" y="${i * rowH + 13}">${money(v)}</text>`;
    }).join("");
    return `<h3>${esc(title)}</h3><svg class="chart" data-chart="${name}" viewBox="0 0 ${CW} ${h}" xmlns="${SVGNS}">${rows}</svg>`;
  }

  function renderCharts() {
    const rs = state.receipts;
    const total = rs.reduce((s, r) => s + (r.cost_usd || 0), 0);
    $("#cost-total").textContent = money(total);
    // One bar per iteration (a verifier's receipt joins its iteration's).
    const iters = new Map();
    for (const r of rs) {
      const key = r.session + "#" + r.iteration;
      const it = iters.get(key) || { label: `${r.session} #${r.iteration}`, cost: 0, inTok: 0, outTok: 0 };
      it.cost += r.cost_usd || 0;
      it.inTok += (r.input_tokens || 0) + (r.cache_read_tokens || 0) + (r.cache_write_tokens || 0);
      it.outTok += r.output_tokens || 0;
      iters.set(key, it);
    }
    const its = [...iters.values()];
    // The cumulative line starts at zero, before the first iteration, so
    // that a single receipt draws a line too.
    let cum = 0;
    const cumPts = [0, ...its.map((it) => (cum += it.cost))];
    const byModel = new Map(), byWorker = new Map();
    for (const r of rs) {
      byModel.set(r.model, (byModel.get(r.model) || 0) + (r.cost_usd || 0));
      byWorker.set(r.worker || "main", (byWorker.get(r.worker || "main") || 0) + (r.cost_usd || 0));
    }
    const max = cum || 1;
    const n = Math.max(1, cumPts.length - 1);
    const d = cumPts.map((v, i) => `${i ? "L" : "M"}${(PAD + (i / n) * (CW - PAD)).toFixed(1)},${(CH - PAD + 4 - (v / max) * (CH - PAD - 14)).toFixed(1)}`).join("");
    const line = `<h3>Cumulative cost</h3><svg class="chart" data-chart="cost-cumulative" viewBox="0 0 ${CW} ${CH}" xmlns="${SVGNS}">` +
      `<line class="axis" x1="${PAD}" y1="${CH - PAD + 4}" x2="${CW}" y2="${CH - PAD + 4}"/><text x="0" y="10">${money(max)}</text>` +
      (d ? `<path class="line" d="${d}"/>` : "") + `</svg>`;
    const tokens = [];
    for (const it of its) {
      tokens.push({ label: it.label + " in", value: it.inTok, cls: "" });
      tokens.push({ label: it.label + " out", value: it.outTok, cls: "out" });
    }
    const sortDesc = (m) => [...m.entries()].sort((a, b) => b[1] - a[1]);
    $("#charts").innerHTML = rs.length === 0 ? `<p class="empty">No receipts yet.</p>` +
      `<svg class="chart" data-chart="cost-per-iteration" viewBox="0 0 ${CW} 1"></svg><svg class="chart" data-chart="cost-cumulative" viewBox="0 0 ${CW} 1"></svg>` +
      `<svg class="chart" data-chart="tokens-per-iteration" viewBox="0 0 ${CW} 1"></svg><svg class="chart" data-chart="by-model" viewBox="0 0 ${CW} 1"></svg><svg class="chart" data-chart="by-worker" viewBox="0 0 ${CW} 1"></svg>` :
      barChart("cost-per-iteration", its.map((it) => ({ label: it.label, value: it.cost })), { title: "Cost per iteration", fmt: money }) +
      line +
      barChart("tokens-per-iteration", tokens, { title: "Tokens per iteration (input incl. cache, output)", fmt: (v) => Math.round(v).toLocaleString() }) +
      hbarChart("by-model", sortDesc(byModel), "Cost by model") +
      hbarChart("by-worker", sortDesc(byWorker), "Cost by worker");
  }

  // ---- the task page ---------------------------------------------------------------

  function when(s) { return s ? new Date(s).toLocaleString() : ""; }

  function renderTask(d) {
    const t = d.task;
    const el = $("#task");
    el.dataset.id = t.id;
    const ref = (r) => `<a href="#/task/${encodeURIComponent(r.id)}">${esc(r.id)}</a> ${esc(r.title || "")} <span class="badge s-${esc(r.status)}">${esc(statusWord[r.status] || r.status)}</span>`;
    const parent = d.parent ? `<p class="parent">Parent: ${ref(d.parent)}</p>` : `<p class="parent empty">No parent.</p>`;
    const blockers = d.blockers.length ? d.blockers.map((b) => `<li data-id="${esc(b.id)}">${ref(b)}${b.summary ? `<span class="summary">${esc(b.summary)}</span>` : ""}</li>`).join("") : `<li class="empty">None.</li>`;
    const children = d.children.length ? `<h2>Children</h2><ul id="children">${d.children.map((c) => `<li data-id="${esc(c.id)}">${ref(c)}</li>`).join("")}</ul>` : "";
    const history = d.history.map((h) => `<li data-kind="${esc(h.kind)}"><time>${esc(when(h.at))}</time> <span class="kind">${esc(h.kind)}</span> <span class="actor">${esc(h.actor)}</span>: ${esc(h.message)}</li>`).join("");
    const receipts = d.receipts.map((r) => `<tr><td>${esc(r.session)}</td><td class="num">${r.iteration}</td><td>${esc(r.mode)}</td><td>${esc(r.worker || "")}</td><td class="agent">${esc(r.agent || "")}</td><td>${esc(r.model)}</td>` +
      `<td class="num">${(r.input_tokens + r.cache_read_tokens + r.cache_write_tokens).toLocaleString()}</td><td class="num">${r.output_tokens.toLocaleString()}</td>` +
      `<td class="num">${money(r.cost_usd)}${r.cost_source === "estimated" ? " (est.)" : ""}</td><td class="num">${r.turns}</td><td>${esc(r.exit_reason)}</td><td>${esc(r.verdict || "")}</td><td>${esc((r.result || "").replaceAll("_", " "))}</td></tr>`).join("");
    const raws = d.raw_logs.length ? d.raw_logs.map((l) => `<li><a href="${esc(l.url)}" target="_blank" rel="noopener">${esc(l.session)}/${esc(l.name)}</a></li>`).join("") : `<li class="empty">None.</li>`;
    el.innerHTML = `<p><a href="#/">← plan</a></p><h1 class="title">${esc(t.title)}</h1>` +
      `<div class="meta"><code>${esc(t.id)}</code><span class="status badge s-${esc(t.status)}">${esc(statusWord[t.status] || t.status)}</span>` +
      (t.ready ? `<span class="badge ready">ready</span>` : "") + (t.stale ? `<span class="badge stale">claim stale: ${esc(t.stale)}</span>` : "") + `<span>priority ${t.priority}</span>` +
      (t.feature ? `<span>feature ${esc(t.feature)}</span>` : "") + (t.holder ? `<span>held by ${esc(t.holder)}</span>` : "") +
      (t.retry_count ? `<span>${t.retry_count} retries</span>` : "") + (t.verification ? `<span>verification ${esc(t.verification)}</span>` : "") + `</div>` +
      `<h2>Description</h2><div class="description">${esc(t.description || "(none)")}</div>` + parent +
      `<h2>Blockers</h2><ul id="blockers">${blockers}</ul>` + children +
      `<h2>History</h2><ol id="history">${history || '<li class="empty">Nothing yet.</li>'}</ol>` +
      `<h2>Receipts</h2><table id="receipts"><thead><tr><th>session</th><th>iter</th><th>mode</th><th>worker</th><th>agent</th><th>model</th><th>in</th><th>out</th><th>cost</th><th>turns</th><th>exit</th><th>verdict</th><th>iteration</th></tr></thead><tbody>${receipts}</tbody></table>` +
      `<h2>Raw streams</h2><ul id="raw-logs">${raws}</ul>`;
  }

  // ---- start --------------------------------------------------------------------------

  function start() {
    setupPanZoom();
    setupList();
    window.addEventListener("hashchange", route);
    window.addEventListener("resize", () => { if (state.route.view !== "task" && !$("#list-panel").hidden) renderRows(); });
    setInterval(tickElapsed, 1000);
    route();
    refreshPlan(); refreshRun(); refreshReceipts();
    connect();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
