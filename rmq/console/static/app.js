// rmq console: the page's script. Plain browser JavaScript, no library.
// Every element is built with createElement and text nodes (el() below), never from HTML
// strings, so names and bodies that come from brokers are shown as text, not read as markup.
"use strict";

// ---------------------------------------------------------------- helpers

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "className") node.className = v;
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    node.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }
function fill(node, ...children) { clear(node); for (const c of children.flat(Infinity)) if (c) node.appendChild(c instanceof Node ? c : document.createTextNode(String(c))); return node; }

function fmtTime(ms) {
  if (!ms || ms <= 0) return "-";
  const d = new Date(ms);
  const p = (n, w = 2) => String(n).padStart(w, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}
function fmtNum(n) { return (n === null || n === undefined) ? "-" : Number(n).toLocaleString("en-US", { maximumFractionDigits: 2 }); }
function localInput(ms) {
  const d = new Date(ms - new Date().getTimezoneOffset() * 60000);
  return d.toISOString().slice(0, 16);
}
function fromInput(v) { return v ? new Date(v).getTime() : ""; }
function q(params) {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v !== "" && v !== null && v !== undefined) u.set(k, v);
  const s = u.toString();
  return s ? "?" + s : "";
}
function link(page, params, text, cls) { return el("a", { href: "#/" + page + q(params), className: cls }, text); }

class ApiError extends Error {
  constructor(status, data) { super(data && data.error ? data.error : `HTTP ${status}`); this.status = status; this.data = data || {}; }
}

// The session: the server keeps it behind an HttpOnly cookie; the page holds only the CSRF
// token that every write must carry (X-CSRF-Token), from the login or GET /api/session.
const session = { user: null, csrf: null, admin: false };

async function answer(r) {
  let data = null;
  try { data = await r.json(); } catch (e) { data = { error: `HTTP ${r.status}: the answer is not JSON` }; }
  if (r.status === 401 && session.user !== null) { session.user = null; session.csrf = null; showLogin("Your session has ended: log in again."); }
  if (!r.ok) throw new ApiError(r.status, data);
  return data;
}

async function api(path, params) {
  return answer(await fetch("/api/" + path + q(params), { headers: { Accept: "application/json" }, credentials: "same-origin" }));
}

async function send(path, body) {
  return answer(await fetch("/api/" + path, { method: "POST", credentials: "same-origin",
                                              headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRF-Token": session.csrf || "" },
                                              body: JSON.stringify(body) }));
}

async function post(path, body) { return (await send(path, body)).result; }

function errorBox(err) {
  const d = (err && err.data) || {};
  const parts = [String(err && err.message ? err.message : err)];
  if (d.code !== undefined && d.code !== null && d.code !== -1 && !parts[0].includes(`code ${d.code}`)) parts.push(`(code ${d.code})`);
  return el("div", { className: "error", role: "alert" }, parts.join(" "));
}
function notice(text) { return el("div", { className: "notice", role: "status" }, text); }

// A table: columns [{key, title, num, render(row), sort}]; sortable when opts.sortable.
function table(columns, rows, opts = {}) {
  const state = opts.state || { key: opts.sortKey || null, desc: !!opts.sortDesc };
  const wrap = el("div", { className: opts.scroll ? "scroll" : null });
  function draw() {
    let data = rows.slice();
    if (state.key) {
      const col = columns.find(c => c.key === state.key);
      const val = col && col.sort ? col.sort : (r => r[state.key]);
      data.sort((a, b) => {
        const x = val(a), y = val(b);
        const c = (typeof x === "number" && typeof y === "number") ? x - y : String(x ?? "").localeCompare(String(y ?? ""));
        return state.desc ? -c : c;
      });
    }
    const head = el("tr", {}, columns.map(c => {
      const th = el("th", { className: (c.num ? "num " : "") + (opts.sortable && c.key ? "sortable" : ""),
                            "data-key": c.key || null },
                    c.title, state.key === c.key ? (state.desc ? " ▼" : " ▲") : "");
      if (opts.sortable && c.key) th.addEventListener("click", () => {
        if (state.key === c.key) state.desc = !state.desc; else { state.key = c.key; state.desc = !!c.num; }
        draw();
      });
      return th;
    }));
    const body = data.length ? data.map(r => el("tr", {}, columns.map(c => el("td", { className: [c.num ? "num" : "", c.cls || ""].join(" ").trim() || null },
                                                                                 c.render ? c.render(r) : (c.num ? fmtNum(r[c.key]) : (r[c.key] ?? ""))))))
                             : [el("tr", {}, el("td", { colspan: columns.length, className: "muted" }, opts.empty || "Nothing to show."))];
    fill(wrap, el("table", { id: opts.id || null }, el("thead", {}, head), el("tbody", {}, body)));
  }
  draw();
  return wrap;
}

function kvTable(obj, id) {
  const rows = Object.entries(obj || {});
  return el("table", { className: "kv", id: id || null },
            el("tbody", {}, rows.length ? rows.map(([k, v]) => el("tr", {}, el("td", {}, k), el("td", { className: "mono wrap" }, typeof v === "object" ? JSON.stringify(v) : String(v))))
                                        : el("tr", {}, el("td", { className: "muted" }, "Nothing to show."))));
}

function card(title, ...children) { return el("section", { className: "card" }, title ? el("h2", {}, title) : null, ...children); }
function kindBadge(kind) { return el("span", { className: "badge " + kind }, kind); }

// ---------------------------------------------------------------- charts (SVG)

const COLORS = ["#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#65a30d", "#4b5563", "#ea580c"];
const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs, ...children) {
  const n = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) n.setAttribute(k, String(v));
  for (const c of children) n.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  return n;
}

// series: [{name, points: [[ms, value], ...]}]; the x axis spans the last `span` ms.
function lineChart(series, span, id, width) {
  const W = Math.max(320, Math.round(width || 800)), H = 240, L = 52, R = 24, T = 10, B = 26;
  const now = Date.now(), x0 = now - span;
  let max = 0;
  for (const s of series) for (const [, v] of s.points) max = Math.max(max, v);
  max = max <= 0 ? 1 : niceMax(max);
  const X = t => L + (W - L - R) * Math.max(0, (t - x0)) / span;
  const Y = v => T + (H - T - B) * (1 - v / max);
  const g = svg("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img" });
  for (let i = 0; i <= 4; i++) {
    const v = max * i / 4, y = Y(v);
    g.appendChild(svg("line", { x1: L, x2: W - R, y1: y, y2: y, class: "grid" }));
    g.appendChild(svg("text", { x: L - 6, y: y + 4, "text-anchor": "end" }, fmtNum(v)));
  }
  for (let i = 0; i <= 6; i++) {
    const t = x0 + span * i / 6, x = X(t);
    const d = new Date(t);
    const hm = `${String(d.getHours()).padStart(2, "0")}:${String(d.getMinutes()).padStart(2, "0")}`;
    g.appendChild(svg("text", { x, y: H - 8, "text-anchor": i === 6 ? "end" : "middle" }, span <= 600_000 ? hm + ":" + String(d.getSeconds()).padStart(2, "0") : hm));
  }
  g.appendChild(svg("line", { x1: L, x2: W - R, y1: H - B, y2: H - B, class: "axis" }));
  series.forEach((s, i) => {
    const pts = s.points.filter(([t]) => t >= x0);
    if (!pts.length) return;
    const d = pts.map(([t, v], j) => `${j ? "L" : "M"}${X(t).toFixed(1)},${Y(v).toFixed(1)}`).join(" ");
    g.appendChild(svg("path", { d, fill: "none", stroke: COLORS[i % COLORS.length], "stroke-width": 2, "vector-effect": "non-scaling-stroke" }));
    if (pts.length === 1) g.appendChild(svg("circle", { cx: X(pts[0][0]), cy: Y(pts[0][1]), r: 3, fill: COLORS[i % COLORS.length] }));
  });
  const legend = el("div", { className: "legend" }, series.map((s, i) => el("span", {}, el("i", { style: null, "data-c": i }), s.name)));
  legend.querySelectorAll("i").forEach((n, i) => { n.style.background = COLORS[i % COLORS.length]; });
  return el("div", { className: "chart", id: id || null }, g, series.length ? legend : el("p", { className: "muted" }, "No samples yet."));
}
function niceMax(v) {
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

// ---------------------------------------------------------------- router

let timers = [];
let generation = 0;
function every(ms, fn) {
  const gen = generation;
  const tick = async () => { if (gen !== generation) return; try { await fn(); } finally { if (gen === generation) timers.push(setTimeout(tick, ms)); } };
  timers.push(setTimeout(tick, ms));
}
function stamp(node) { fill(node, "updated " + new Date().toLocaleTimeString()); }

const pages = {};
function route() {
  generation++;
  timers.forEach(clearTimeout); timers = [];
  const hash = location.hash.replace(/^#\/?/, "");
  const [name, query] = hash.split("?");
  const params = Object.fromEntries(new URLSearchParams(query || ""));
  const page = pages[name || "home"] ? (name || "home") : "home";
  document.querySelector("header.top").classList.remove("open");
  document.getElementById("nav-toggle").setAttribute("aria-expanded", "false");
  document.querySelectorAll("#nav a").forEach(a => a.classList.toggle("active", a.dataset.page === page ||
      (page === "topic" && a.dataset.page === "topics") || (page === "group" && a.dataset.page === "groups") ||
      (page === "message" && a.dataset.page === "messages")));
  // each visit renders into its own element: a page still awaiting an answer after the user
  // moved on writes into its detached element, never into the next page
  const main = clear(document.getElementById("main"));
  main.dataset.page = page;
  const view = el("div", { className: "view" });
  main.appendChild(view);
  Promise.resolve(pages[page](view, params)).catch(e => view.appendChild(errorBox(e)));
}
window.addEventListener("hashchange", () => { if (session.user !== null) route(); });
window.addEventListener("DOMContentLoaded", async () => {
  document.getElementById("logout").addEventListener("click", logout);
  // narrow screens: the nav folds under the Menu button
  document.getElementById("nav-toggle").addEventListener("click", ev => {
    const open = document.querySelector("header.top").classList.toggle("open");
    ev.currentTarget.setAttribute("aria-expanded", String(open));
  });
  try { loggedIn(await api("session")); }
  catch (e) { showLogin(e.status === 401 ? "" : e.message); }
});

function loggedIn(s) {
  session.user = s.username; session.csrf = s.csrfToken; session.admin = s.admin !== false;
  document.body.classList.remove("anonymous");
  document.body.classList.toggle("readonly", !session.admin);
  refreshNames();
  fill(document.getElementById("user"), s.username, session.admin ? null : el("span", { className: "badge warn", id: "read-only", title: "This account may look, not change: the console refuses its writes." }, "read-only"));
  api("version").then(v => fill(document.getElementById("namesrv"), `rmq ${v.version} · name server ${v.namesrvAddr}`)).catch(() => {});
  route();
}

function showLogin(message) {
  generation++;
  timers.forEach(clearTimeout); timers = [];
  document.body.classList.add("anonymous");
  fill(document.getElementById("user"));
  fill(document.getElementById("namesrv"));
  const main = clear(document.getElementById("main"));
  main.dataset.page = "login";
  const user = el("input", { id: "login-user", name: "username", autocomplete: "username", required: true, autofocus: true });
  const password = el("input", { id: "login-password", name: "password", type: "password", autocomplete: "current-password", required: true });
  const problem = el("div", { id: "login-problem" }, message ? errorBox(message) : null);
  const submit = el("button", { id: "login-submit", type: "submit" }, "Log in");
  const form = el("form", { id: "login-form", className: "card login" }, el("h1", {}, "Log in to the rmq console"),
                  el("label", {}, "User", user), el("label", {}, "Password", password), submit, problem);
  form.addEventListener("submit", async ev => {
    ev.preventDefault();
    submit.disabled = true;
    try {
      const r = await fetch("/api/login", { method: "POST", credentials: "same-origin",
                                            headers: { "Content-Type": "application/json", Accept: "application/json" },
                                            body: JSON.stringify({ username: user.value, password: password.value }) });
      const s = await answer(r);
      password.value = "";
      loggedIn(s);
    } catch (e) {
      fill(problem, errorBox(e));
      password.value = "";
    } finally { submit.disabled = false; }
  });
  main.appendChild(form);
}

async function logout() {
  try { await send("logout", {}); } catch (e) { /* the session is gone either way */ }
  session.user = null; session.csrf = null;
  showLogin("");
}

// The topic and group names the forms offer (a datalist: pick one, or type any name).
async function refreshNames() {
  try {
    const list = await api("topics");
    fill(document.getElementById("topic-names"), list.filter(t => t.kind === "normal" || t.topic === "RMQ_SYS_TRACE_TOPIC").map(t => el("option", { value: t.topic })));
    const groups = new Set();
    for (const t of list) for (const pre of ["%RETRY%", "%DLQ%"]) if (t.topic.startsWith(pre)) groups.add(t.topic.slice(pre.length));
    fill(document.getElementById("group-names"), [...groups].sort().map(g => el("option", { value: g })));
  } catch (e) { /* the lists are a help; the pages show their own errors */ }
}
function topicInput(attrs) { return el("input", { list: "topic-names", autocomplete: "off", ...attrs }); }
function groupInput(attrs) { return el("input", { list: "group-names", autocomplete: "off", ...attrs }); }

// A section that loads `load()` now and every `ms` (0: once), showing its error in place.
function live(container, ms, load, render) {
  const body = el("div", {});
  const upd = el("span", { className: "updated" });
  container.appendChild(upd);
  container.appendChild(body);
  const run = async () => {
    try { const data = await load(); fill(body, render(data)); stamp(upd); }
    catch (e) { fill(body, errorBox(e)); }
  };
  const first = run();
  if (ms) every(ms, run);
  return { refresh: run, ready: first };
}

// ---------------------------------------------------------------- pages

pages.home = async (main) => {
  main.appendChild(el("h1", {}, "Overview"));
  const brokers = card("Brokers");
  const topics = card("Topics");
  main.appendChild(brokers); main.appendChild(topics);
  live(brokers, 5000, () => api("cluster"), d => brokerTable(d.brokers, false));
  live(topics, 10000, () => api("topics"), list => {
    const normal = list.filter(t => t.kind === "normal");
    const counts = {};
    for (const t of list) counts[t.kind] = (counts[t.kind] || 0) + 1;
    return [el("div", { className: "stats" }, ["normal", "retry", "dlq", "system"].map(k =>
              el("div", { className: "stat" }, el("div", { className: "v" }, fmtNum(counts[k] || 0)), el("div", { className: "k" }, k + " topics")))),
            table([{ key: "topic", title: "Topic", render: r => link("topic", { name: r.topic }, r.topic) },
                   { key: "kind", title: "Kind", render: r => kindBadge(r.kind) }], normal, { id: "home-topics", empty: "No topics yet.", scroll: true })];
  });
};

function brokerTable(rows, full) {
  const cols = [
    { key: "cluster", title: "Cluster" },
    { key: "brokerName", title: "Broker" },
    { key: "brokerId", title: "Id", num: true },
    { key: "addr", title: "Address", cls: "mono" },
    { key: "version", title: "Version", cls: "wrap", render: r => r.error ? el("span", { className: "badge bad" }, r.error) : r.version },
    { key: "putTps", title: "Put TPS", num: true },
    { key: "getTps", title: "Get TPS", num: true },
    { key: "msgPutTotalTodayNow", title: "Put today", num: true },
    { key: "msgGetTotalTodayNow", title: "Got today", num: true },
  ];
  if (full) {
    cols.push({ key: "commitLogDiskRatio", title: "Disk used", num: true, render: r => r.error ? "-" : (r.commitLogDiskRatio * 100).toFixed(1) + " %" });
    cols.push({ key: "runtime", title: "Running for", render: r => (r.runtime || "").replace(/^\[ | \]$/g, "").replace(/ days?,?/, "d").replace(/ hours?,?/, "h").replace(/ minutes?,?/, "m").replace(/ seconds?/, "s") });
    cols.push({ title: "", render: r => [el("button", { className: "small secondary", "data-action": "status", onclick: () => showBroker(r, "runtime") }, "Status"), " ",
                                      el("button", { className: "small secondary", "data-action": "config", onclick: () => showBroker(r, "config") }, "Config")] });
  }
  return table(cols, rows, { id: "brokers", empty: "No broker is registered with the name server." });
}

let brokerPanel = null;
async function showBroker(r, what) {
  if (!brokerPanel) return;
  fill(brokerPanel, el("h2", {}, `${what === "config" ? "Configuration" : "Runtime status"} of ${r.brokerName} (${r.addr})`), el("p", { className: "muted" }, "Loading…"));
  try {
    const data = await api("broker/" + what, { addr: r.addr });
    fill(brokerPanel, el("h2", {}, `${what === "config" ? "Configuration" : "Runtime status"} of ${r.brokerName} (${r.addr})`),
         el("div", { className: "scroll" }, kvTable(data, "broker-" + what)));
  } catch (e) { brokerPanel.appendChild(errorBox(e)); }
}

pages.cluster = async (main) => {
  main.appendChild(el("h1", {}, "Cluster"));
  const c = card("Brokers");
  main.appendChild(c);
  brokerPanel = el("section", { className: "card", id: "broker-panel" }, el("p", { className: "muted" }, "Choose Status or Config of a broker."));
  main.appendChild(brokerPanel);
  live(c, 5000, () => api("cluster"), d => brokerTable(d.brokers, true));
};

// ---- topics

function topicForm(initial, done) {
  const f = el("form", { className: "row", id: "topic-form" });
  const name = el("input", { name: "topic", placeholder: "TopicName", value: initial.topic || "", required: true, readonly: initial.topic ? true : null });
  const rq = el("input", { name: "readQueueNums", type: "number", min: 1, max: 1024, value: initial.readQueueNums || 8, style: null });
  const wq = el("input", { name: "writeQueueNums", type: "number", min: 1, max: 1024, value: initial.writeQueueNums || 8 });
  const perm = el("select", { name: "perm" }, [["6", "RW (6)"], ["4", "R (4)"], ["2", "W (2)"]].map(([v, t]) => el("option", { value: v, selected: String(initial.perm || 6) === v }, t)));
  const cluster = el("input", { name: "cluster", placeholder: "all clusters" });
  // Java 5's message.type attribute; "" leaves it as it is (an untyped topic takes every kind)
  const mtype = el("select", { name: "messageType" }, [["", initial.topic ? "(unchanged)" : "(untyped)"], ["NORMAL", "NORMAL"], ["FIFO", "FIFO"], ["DELAY", "DELAY"], ["TRANSACTION", "TRANSACTION"]]
    .map(([v, t]) => el("option", { value: v }, t)));
  const out = el("div", {});
  f.append(el("label", {}, "Topic", name), el("label", {}, "Read queues", rq), el("label", {}, "Write queues", wq),
           el("label", {}, "Perm", perm), el("label", {}, "Message type", mtype), el("label", {}, "Cluster", cluster), el("button", { type: "submit" }, initial.topic ? "Update" : "Create"));
  f.addEventListener("submit", async ev => {
    ev.preventDefault();
    fill(out);
    try {
      const addrs = await post("topic", { topic: name.value.trim(), readQueueNums: +rq.value, writeQueueNums: +wq.value, perm: +perm.value, cluster: cluster.value.trim(), messageType: mtype.value });
      fill(out, notice(`Topic ${name.value.trim()} written on ${addrs.join(", ")}.`));
      if (done) done(name.value.trim());
    } catch (e) { fill(out, errorBox(e)); }
  });
  return el("div", {}, f, out);
}

pages.topics = async (main) => {
  main.appendChild(el("h1", {}, "Topics"));
  main.appendChild(card("Create or update a topic", topicForm({}, () => listing.refresh())));
  const c = card(null);
  const kinds = { normal: true, retry: false, dlq: false, system: false };
  const search = el("input", { id: "topic-search", placeholder: "Filter by name", type: "search" });
  const filters = el("div", { className: "row", id: "topic-filters" }, el("label", {}, "Name", search),
                     Object.keys(kinds).map(k => {
                       const cb = el("input", { type: "checkbox", name: k, checked: kinds[k] });
                       cb.addEventListener("change", () => { kinds[k] = cb.checked; redraw(); });
                       return el("label", { className: "check" }, cb, k);
                     }));
  c.appendChild(filters);
  main.appendChild(c);
  let last = [];
  const holder = el("div", {});
  const redraw = () => {
    const s = search.value.trim().toLowerCase();
    fill(holder, table([{ key: "topic", title: "Topic", render: r => link("topic", { name: r.topic }, r.topic) },
                        { key: "kind", title: "Kind", render: r => kindBadge(r.kind) }],
                       last.filter(t => kinds[t.kind] && (!s || t.topic.toLowerCase().includes(s))), { id: "topic-list", sortable: true, sortKey: "topic" }));
  };
  search.addEventListener("input", redraw);
  const listing = live(c, 0, () => api("topics"), list => { last = list; redraw(); return holder; });
};

pages.topic = async (main, p) => {
  const topic = p.name || "";
  main.appendChild(el("h1", {}, "Topic ", el("span", { className: "mono", id: "topic-name" }, topic)));
  // the topic's message type (Java 5 typed topics: message.type)
  const typeLine = el("p", { id: "topic-type" });
  main.appendChild(typeLine);
  api("topic/config", { topic }).then(c => fill(typeLine, "Message type: ",
    c.messageType ? el("span", { className: "badge" }, c.messageType) : el("span", { className: "muted" }, "untyped (every kind of message)")))
    .catch(e => fill(typeLine, errorBox(e)));
  const grid = el("div", { className: "grid" });
  const status = card("Queues");
  const consumers = card("Consuming groups");
  grid.append(status, consumers);
  main.appendChild(grid);
  const statusView = live(status, 5000, () => api("topic/status", { topic }), rows => table([
    { key: "brokerName", title: "Broker" }, { key: "queueId", title: "Queue", num: true },
    { key: "minOffset", title: "Min offset", num: true }, { key: "maxOffset", title: "Max offset", num: true },
    { key: "lastUpdateTimestamp", title: "Last stored", render: r => fmtTime(r.lastUpdateTimestamp) }], rows, { id: "topic-status" }));
  live(consumers, 3000, () => api("topic/consumers", { topic }), rows => table([
    { key: "group", title: "Group", render: r => link("group", { name: r.group }, r.group) },
    { key: "diffTotal", title: "Lag", num: true, render: r => r.error ? el("span", { className: "muted" }, r.error) : fmtNum(r.diffTotal) },
    { key: "consumeTps", title: "TPS", num: true }], rows, { id: "topic-consumers", empty: "No group consumes this topic." }));

  const send = card("Send a test message");
  const body = el("textarea", { name: "body", placeholder: "Message body" }, "Hello from the rmq console");
  const keys = el("input", { name: "keys", placeholder: "key1 key2" });
  const tags = el("input", { name: "tags", placeholder: "TagA" });
  const group = el("input", { name: "messageGroup", placeholder: "FIFO topics" });
  const out = el("div", { id: "send-result" });
  const form = el("form", { id: "send-form" }, el("div", { className: "row" }, el("label", {}, "Keys", keys), el("label", {}, "Tag", tags), el("label", {}, "Message group", group)), body,
                  el("div", { className: "row", style: null }, el("button", { type: "submit" }, "Send")), out);
  form.addEventListener("submit", async ev => {
    ev.preventDefault();
    fill(out);
    try {
      const r = await post("topic/send", { topic, body: body.value, keys: keys.value, tags: tags.value, messageGroup: group.value });
      statusView.refresh();
      fill(out, notice(`${r.sendStatus}: stored in ${r.brokerName} queue ${r.queueId} at offset ${r.queueOffset}.`),
           kvTable({ "Message id": r.msgId, "Offset message id": r.offsetMsgId }, "send-ids"),
           el("p", {}, link("message", { id: r.msgId, topic }, "Open the message")));
    } catch (e) { fill(out, errorBox(e)); }
  });
  send.appendChild(form);

  const route = card("Route");
  live(route, 0, () => api("topic/route", { topic }), r => [
    table([{ key: "cluster", title: "Cluster" }, { key: "brokerName", title: "Broker" },
           { title: "Addresses", render: b => Object.entries(b.brokerAddrs).map(([id, a]) => `${id}: ${a}`).join(", "), cls: "mono" }], r.brokerDatas, { id: "topic-route" }),
    table([{ key: "brokerName", title: "Broker" }, { key: "readQueueNums", title: "Read queues", num: true },
           { key: "writeQueueNums", title: "Write queues", num: true }, { key: "permText", title: "Perm" }], r.queueDatas)]);
  const grid2 = el("div", { className: "grid" }, send, route);
  main.appendChild(grid2);

  const manage = card("Update or delete");
  let qd = {};
  try { const r = await api("topic/route", { topic }); qd = r.queueDatas[0] || {}; } catch (e) { /* shown above */ }
  manage.appendChild(topicForm({ topic, readQueueNums: qd.readQueueNums, writeQueueNums: qd.writeQueueNums, perm: qd.perm }));
  const delOut = el("div", {});
  manage.appendChild(el("div", { className: "row" }, el("button", { className: "danger", id: "delete-topic", onclick: async () => {
    if (!confirm(`Delete topic ${topic} from every broker and the name server?`)) return;
    try { await post("topic/delete", { topic }); fill(delOut, notice(`Topic ${topic} deleted.`)); }
    catch (e) { fill(delOut, errorBox(e)); }
  } }, "Delete topic")));
  manage.appendChild(delOut);
  main.appendChild(manage);
};

// ---- consumer groups

pages.groups = async (main) => {
  main.appendChild(el("h1", {}, "Consumer groups"));
  main.appendChild(card("Create or update a group", groupForm("", () => {})));
  const c = card(null);
  const search = el("input", { id: "group-search", placeholder: "Filter by name", type: "search" });
  const sys = el("input", { type: "checkbox", name: "system" });
  c.appendChild(el("div", { className: "row" }, el("label", {}, "Name", search), el("label", { className: "check" }, sys, "system groups")));
  main.appendChild(c);
  let last = [];
  const state = { key: "diffTotal", desc: true };
  const holder = el("div", {});
  const redraw = () => {
    const s = search.value.trim().toLowerCase();
    fill(holder, table([
      { key: "group", title: "Group", render: r => link("group", { name: r.group }, r.group) },
      { key: "count", title: "Online", num: true, render: r => r.count === undefined ? "?" : fmtNum(r.count) },
      { key: "messageModel", title: "Model", render: r => r.messageModel || "-" },
      { key: "version", title: "Version", render: r => r.version || "-" },
      { key: "consumeTps", title: "TPS", num: true },
      { key: "diffTotal", title: "Lag", num: true },
      { key: "brokers", title: "Brokers", render: r => (r.brokers || []).join(", "), sort: r => (r.brokers || []).join(",") }],
      last.filter(g => (sys.checked || !g.system) && (!s || g.group.toLowerCase().includes(s))), { id: "group-list", sortable: true, state, empty: "No consumer group yet." }));
  };
  search.addEventListener("input", redraw);
  sys.addEventListener("change", redraw);
  live(c, 5000, () => api("groups"), list => { last = list; redraw(); return holder; });
};

function groupForm(group, done, config) {
  config = config || {};
  const f = el("form", { className: "row", id: "group-form" });
  const name = el("input", { name: "group", value: group, placeholder: "GroupName", readonly: group ? true : null, required: true });
  const enable = el("input", { type: "checkbox", name: "consumeEnable", checked: config.consumeEnable !== false });
  // consumeBroadcastEnable: Java SubscriptionGroupConfig's default is true (the broker refuses
  // BROADCASTING pulls only when it is false): a new group's box starts ticked as Java's does
  const bcast = el("input", { type: "checkbox", name: "consumeBroadcastEnable", checked: config.consumeBroadcastEnable !== false });
  const orderly = el("input", { type: "checkbox", name: "consumeMessageOrderly", checked: !!config.consumeMessageOrderly });
  const retry = el("input", { type: "number", name: "retryMaxTimes", min: 0, max: 1000, value: config.retryMaxTimes ?? 16 });
  const rqn = el("input", { type: "number", name: "retryQueueNums", min: 0, max: 64, value: config.retryQueueNums ?? 1 });
  const bid = el("input", { type: "number", name: "brokerId", min: 0, max: 64, value: config.brokerId ?? 0 });
  const slow = el("input", { type: "number", name: "whichBrokerWhenConsumeSlowly", min: 0, max: 64, value: config.whichBrokerWhenConsumeSlowly ?? 1 });
  const out = el("div", {});
  f.append(el("label", {}, "Group", name), el("label", {}, "Max retries", retry), el("label", {}, "Retry queues", rqn),
           el("label", {}, "Broker id", bid), el("label", {}, "Broker when slow", slow),
           el("label", { className: "check" }, enable, "consume enabled"),
           el("label", { className: "check", title: "consumeBroadcastEnable: whether BROADCASTING consumers of this group are served (Java's default: yes). It is a permission, not the group's message model." }, bcast, "allow broadcast consumers"),
           el("label", { className: "check" }, orderly, "orderly"), el("button", { type: "submit" }, group ? "Update" : "Create"));
  f.addEventListener("submit", async ev => {
    ev.preventDefault();
    fill(out);
    try {
      const addrs = await post("group", { group: name.value.trim(), config: {
        consumeEnable: enable.checked, consumeBroadcastEnable: bcast.checked, consumeMessageOrderly: orderly.checked,
        retryMaxTimes: +retry.value, retryQueueNums: +rqn.value, brokerId: +bid.value, whichBrokerWhenConsumeSlowly: +slow.value } });
      fill(out, notice(`Group ${name.value.trim()} written on ${addrs.join(", ")}.`));
      done(name.value.trim());
    } catch (e) { fill(out, errorBox(e)); }
  });
  return el("div", {}, f, out);
}

pages.group = async (main, p) => {
  const group = p.name || "";
  main.appendChild(el("h1", {}, "Consumer group ", el("span", { className: "mono", id: "group-name" }, group)));
  const summary = el("div", { className: "stats", id: "group-summary" });
  main.appendChild(summary);
  const progress = card("Progress per queue");
  main.appendChild(progress);
  let detail = null;
  const view = live(progress, 3000, () => api("group", { group }), d => {
    detail = d;
    fill(summary, [["Lag", fmtNum(d.diffTotal), "group-lag"], ["Consume TPS", fmtNum(d.consumeTps), "group-tps"],
                   ["Online clients", fmtNum(d.connections.length), "group-online"], ["Model", d.messageModel || "-", null]]
      .map(([k, v, id]) => el("div", { className: "stat" }, el("div", { className: "v", id }, v), el("div", { className: "k" }, k))));
    fill(conns, d.connectionError ? el("p", { className: "muted" }, d.connectionError) : table([
      { key: "clientId", title: "Client id", cls: "mono" }, { key: "clientAddr", title: "Address", cls: "mono" },
      { key: "language", title: "Language" }, { key: "version", title: "Version" },
      { title: "", render: r => el("button", { className: "small secondary", "data-action": "running", onclick: () => running(r.clientId) }, "Running info") }],
      d.connections, { id: "group-connections" }),
      d.subscriptions.length ? table([{ key: "topic", title: "Subscribed topic" }, { key: "subString", title: "Expression", cls: "mono" },
                                      { key: "expressionType", title: "Type" }], d.subscriptions) : null);
    if (!topicSel.options.length || topicSel.dataset.topics !== d.topics.join(",")) {
      topicSel.dataset.topics = d.topics.join(",");
      fill(topicSel, d.topics.map(t => el("option", { value: t }, t)));
    }
    return [d.statsError ? el("p", { className: "muted" }, d.statsError) : null,
            table([{ key: "topic", title: "Topic", render: r => [r.topic, r.retry ? [" ", kindBadge("retry")] : null] },
                   { key: "brokerName", title: "Broker" }, { key: "queueId", title: "Queue", num: true },
                   { key: "brokerOffset", title: "Broker offset", num: true }, { key: "consumerOffset", title: "Consumer offset", num: true },
                   { key: "diff", title: "Lag", num: true }, { key: "lastTimestamp", title: "Last consumed", render: r => fmtTime(r.lastTimestamp) }],
                  d.queues, { id: "group-queues", empty: "No offsets yet." })];
  });

  const grid = el("div", { className: "grid" });
  const connCard = card("Clients");
  const conns = el("div", {});
  const runOut = el("div", { id: "running-info" });
  connCard.append(conns, runOut);
  async function running(clientId) {
    fill(runOut, el("p", { className: "muted" }, "Asking " + clientId + "…"));
    try {
      const r = await api("group/running", { group, clientId });
      fill(runOut, el("h2", {}, "Running info of " + clientId), kvTable(r.properties),
           table([{ key: "topic", title: "Topic" }, { key: "brokerName", title: "Broker" }, { key: "queueId", title: "Queue", num: true },
                  { key: "commitOffset", title: "Committed", num: true }, { key: "cachedMsgCount", title: "Cached", num: true }], r.queues));
    } catch (e) { fill(runOut, errorBox(e)); }
  }

  const resetCard = card("Reset offset");
  const topicSel = el("select", { name: "topic", id: "reset-topic" });
  const when = el("input", { type: "datetime-local", name: "timestamp", id: "reset-time", value: localInput(Date.now() - 3600_000) });
  const resetOut = el("div", { id: "reset-result" });
  async function reset(ts) {
    fill(resetOut);
    const topics = topicSel.value ? [topicSel.value] : [];
    try {
      const rows = await post("group/reset", { group, topics, timestamp: ts });
      fill(resetOut, notice(`${rows.length} queue offsets set.`), table([{ key: "topic", title: "Topic" }, { key: "brokerName", title: "Broker" },
            { key: "queueId", title: "Queue", num: true }, { key: "offset", title: "Offset", num: true }, { key: "how", title: "Set by" }], rows));
      view.refresh();
    } catch (e) { fill(resetOut, errorBox(e)); }
  }
  resetCard.append(el("div", { className: "row" }, el("label", {}, "Topic", topicSel), el("label", {}, "To the time", when),
                      el("button", { id: "reset-button", onclick: () => { const t = fromInput(when.value); if (t === "") fill(resetOut, errorBox("Choose a time.")); else reset(t); } }, "Reset"),
                      el("button", { className: "secondary", id: "skip-button", onclick: () => reset(-1) }, "Skip accumulated")), resetOut);
  grid.append(connCard, resetCard);
  main.appendChild(grid);

  const manage = card("Configuration");
  main.appendChild(manage);
  await view.ready;
  const cfg = detail && detail.configs.length ? detail.configs[0].config : {};
  manage.appendChild(groupForm(group, () => view.refresh(), cfg));
  if (detail && detail.configs.length) manage.appendChild(table([{ key: "cluster", title: "Cluster" }, { key: "brokerName", title: "Broker" },
      { title: "Config", cls: "mono wrap", render: r => Object.entries(r.config).map(([k, v]) => `${k}=${v}`).join("  ") }], detail.configs));
  const delOut = el("div", {});
  manage.appendChild(el("div", { className: "row" }, el("button", { className: "danger", id: "delete-group", onclick: async () => {
    if (!confirm(`Delete consumer group ${group} and its offsets?`)) return;
    try { await post("group/delete", { group }); fill(delOut, notice(`Group ${group} deleted.`)); } catch (e) { fill(delOut, errorBox(e)); }
  } }, "Delete group")));
  manage.appendChild(delOut);
};

// ---- producers

pages.producers = async (main, p) => {
  main.appendChild(el("h1", {}, "Producers"));
  const c = card("Online producers of a group");
  const topic = topicInput({ name: "topic", placeholder: "Topic", value: p.topic || "" });
  const group = el("input", { name: "group", placeholder: "Producer group", value: p.group || "" });
  const out = el("div", { id: "producer-list" });
  const f = el("form", { className: "row" }, el("label", {}, "Topic", topic), el("label", {}, "Group", group), el("button", { type: "submit" }, "Search"));
  f.addEventListener("submit", async ev => {
    ev.preventDefault();
    fill(out, el("p", { className: "muted" }, "Searching…"));
    try {
      const rows = await api("producers", { topic: topic.value.trim(), group: group.value.trim() });
      fill(out, table([{ key: "clientId", title: "Client id", cls: "mono" }, { key: "clientAddr", title: "Address", cls: "mono" },
                       { key: "language", title: "Language" }, { key: "version", title: "Version" }], rows, { empty: "No producer of this group is connected." }));
    } catch (e) { fill(out, errorBox(e)); }
  });
  c.append(f, out);
  main.appendChild(c);
};

// ---- messages

function messageTable(rows, topic, opts = {}) {
  const cols = [];
  if (opts.select) cols.push({ title: "", render: r => el("input", { type: "checkbox", className: "pick", value: r.offsetMsgId }) });
  cols.push({ key: "msgId", title: "Message id", cls: "mono", render: r => link("message", { id: r.msgId, topic: r.topic }, r.msgId) },
            { key: "tags", title: "Tag" }, { key: "keys", title: "Keys", cls: "wrap", render: r => r.keys.join(" ") },
            { key: "storeTimestamp", title: "Stored", render: r => fmtTime(r.storeTimestamp) },
            { key: "queueId", title: "Queue", num: true }, { key: "queueOffset", title: "Offset", num: true },
            { key: "preview", title: "Body", cls: "mono wrap" });
  return table(cols, rows, { id: opts.id || "message-list", empty: "No message found.", scroll: true });
}

pages.messages = async (main, p) => {
  main.appendChild(el("h1", {}, "Messages"));
  const c = card(null);
  const out = el("div", { id: "message-results" });
  const tabs = el("div", { className: "tabs" });
  const forms = {};
  const show = which => {
    tabs.querySelectorAll("button").forEach(b => b.classList.toggle("active", b.dataset.tab === which));
    for (const [k, f] of Object.entries(forms)) f.style.display = k === which ? "" : "none";
  };
  for (const [k, t] of [["time", "By topic and time"], ["key", "By key"], ["id", "By message id"]])
    tabs.appendChild(el("button", { "data-tab": k, type: "button", onclick: () => show(k) }, t));
  const run = async (params, detail) => {
    fill(out, el("p", { className: "muted" }, "Searching…"));
    try {
      if (detail) { location.hash = "#/message" + q(params); return; }
      const r = await api("messages", params);
      fill(out, el("p", { className: "muted" }, `${r.messages.length} message(s)` + (r.truncated ? ` (the newest ${r.limit} only)` : "")),
           messageTable(r.messages, params.topic));
    } catch (e) { fill(out, errorBox(e)); }
  };
  { const topic = topicInput({ name: "topic", placeholder: "Topic", value: p.topic || "" });
    const b = el("input", { type: "datetime-local", name: "begin", value: localInput(Date.now() - 3600_000) });
    const e = el("input", { type: "datetime-local", name: "end" });
    forms.time = el("form", { className: "row", id: "by-time" }, el("label", {}, "Topic", topic), el("label", {}, "From", b), el("label", {}, "To (empty: now)", e), el("button", { type: "submit" }, "Search"));
    forms.time.addEventListener("submit", ev => { ev.preventDefault(); run({ topic: topic.value.trim(), begin: fromInput(b.value), end: fromInput(e.value) }); }); }
  { const topic = topicInput({ name: "topic", placeholder: "Topic", value: p.topic || "" });
    const key = el("input", { name: "key", placeholder: "Key" });
    forms.key = el("form", { className: "row", id: "by-key" }, el("label", {}, "Topic", topic), el("label", {}, "Key", key), el("button", { type: "submit" }, "Search"));
    forms.key.addEventListener("submit", ev => { ev.preventDefault(); run({ topic: topic.value.trim(), key: key.value.trim() }); }); }
  { const topic = topicInput({ name: "topic", placeholder: "Topic (needed for a client message id)", value: p.topic || "" });
    const id = el("input", { name: "msgId", placeholder: "Message id", size: 36 });
    forms.id = el("form", { className: "row", id: "by-id" }, el("label", {}, "Topic", topic), el("label", {}, "Message id", id), el("button", { type: "submit" }, "Open"));
    forms.id.addEventListener("submit", ev => { ev.preventDefault(); run({ id: id.value.trim(), topic: topic.value.trim() }, true); }); }
  c.append(tabs, forms.time, forms.key, forms.id, out);
  main.append(c);
  show(p.tab || "time");
};

pages.message = async (main, p) => {
  main.appendChild(el("h1", {}, "Message ", el("span", { className: "mono", id: "message-id" }, p.id || "")));
  let m;
  try { m = await api("message", { msgId: p.id || "", topic: p.topic || "" }); }
  catch (e) { main.appendChild(errorBox(e)); return; }
  const grid = el("div", { className: "grid" });
  grid.append(card("Message", kvTable({
    Topic: m.topic, "Message id": m.msgId, "Offset message id": m.offsetMsgId, Tag: m.tags || "-", Keys: m.keys.join(" ") || "-",
    Queue: `${m.brokerName} / ${m.queueId} @ ${m.queueOffset}`, "Stored at": fmtTime(m.storeTimestamp), "Born at": fmtTime(m.bornTimestamp),
    "Born host": m.bornHost, "Store host": m.storeHost, "Reconsume times": m.reconsumeTimes, "Body size": m.body.size + " bytes" }, "message-info")),
    card("Properties", kvTable(m.properties, "message-properties")));
  main.appendChild(grid);
  main.appendChild(el("p", {}, link("trace", { msgId: m.msgId }, "Message trace of this message")));
  main.appendChild(card("Body" + (m.body.encoding === "base64" ? " (binary, base64)" : "") + (m.body.truncated ? " (first part)" : ""),
                        el("pre", { className: "body", id: "message-body" }, m.body.text)));
  const tracks = card("Consume status per group");
  const out = el("div", { id: "resend-result" });
  tracks.append(table([{ key: "group", title: "Group", render: r => r.group ? link("group", { name: r.group }, r.group) : "-" },
    { key: "status", title: "Status", render: r => el("span", { className: "badge " + (r.status === "CONSUMED" ? "ok" : r.status === "NOT_CONSUME_YET" ? "warn" : "bad"), "data-status": r.status }, r.status) },
    { key: "error", title: "Note", cls: "wrap", render: r => r.error || (r.clients || []).join(", ") },
    { title: "", render: r => r.group ? el("button", { className: "small secondary", "data-action": "resend", "data-group": r.group, onclick: async () => {
        fill(out, el("p", { className: "muted" }, "Resending…"));
        try { const x = await post("message/resend", { msgId: m.offsetMsgId, group: r.group, topic: m.topic });
              fill(out, notice(`Resent to ${x.clientId}: ${x.consumeResult}${x.remark ? " (" + x.remark + ")" : ""}.`)); }
        catch (e) { fill(out, errorBox(e)); } } }, "Resend") : "" }],
    m.tracks, { id: "message-tracks", empty: "No group consumes this topic." }), out);
  main.appendChild(tracks);
};

// ---- dead letters

pages.dlq = async (main, p) => {
  main.appendChild(el("h1", {}, "Dead-letter messages"));
  const c = card(null);
  const group = groupInput({ name: "group", placeholder: "Consumer group", value: p.group || "" });
  const b = el("input", { type: "datetime-local", name: "begin", value: localInput(Date.now() - 24 * 3600_000) });
  const e = el("input", { type: "datetime-local", name: "end" });
  const out = el("div", { id: "dlq-results" });
  const result = el("div", { id: "dlq-resend-result" });
  const f = el("form", { className: "row", id: "dlq-form" }, el("label", {}, "Group", group), el("label", {}, "From", b), el("label", {}, "To (empty: now)", e), el("button", { type: "submit" }, "Search"));
  f.addEventListener("submit", async ev => {
    ev.preventDefault();
    fill(out, el("p", { className: "muted" }, "Searching…")); fill(result);
    const params = { group: group.value.trim(), begin: fromInput(b.value), end: fromInput(e.value) };
    try {
      const r = await api("dlq", params);
      const picks = () => [...out.querySelectorAll("input.pick")];
      const resend = el("button", { id: "dlq-resend", onclick: async () => {
        const ids = picks().filter(x => x.checked).map(x => x.value);
        if (!ids.length) { fill(result, errorBox("Choose the messages to resend.")); return; }
        if (ids.length > 100) { fill(result, errorBox(`At most 100 messages per resend (${ids.length} chosen).`)); return; }
        try {
          const rows = await post("dlq/resend", { group: group.value.trim(), msgIds: ids });
          fill(result, table([{ key: "msgId", title: "Message", cls: "mono" }, { key: "ok", title: "Result", render: r => r.ok ? el("span", { className: "badge ok" }, r.consumeResult || "OK") : el("span", { className: "badge bad" }, r.error) },
                              { key: "clientId", title: "Client", cls: "mono" }], rows, { id: "dlq-resend-table" }));
        } catch (err) { fill(result, errorBox(err)); }
      } }, "Resend selected to the group");
      const all = el("input", { type: "checkbox", id: "dlq-select-all" });
      all.addEventListener("change", () => picks().forEach(x => { x.checked = all.checked; }));
      // the export is the search's own rows, at most its limit (the newest)
      const exportLink = fmt => el("a", { className: "button-link", id: "dlq-export-" + fmt, download: "", href: "/api/dlq/export" + q({ ...params, format: fmt }) }, "Export " + fmt.toUpperCase());
      fill(out, r.note ? el("p", { className: "muted" }, r.note) : null,
           el("p", { className: "muted", id: "dlq-count" }, `${r.messages.length} message(s)` + (r.truncated ? ` (the newest ${r.limit} only)` : "")),
           r.messages.length ? el("div", { className: "row" }, el("label", { className: "check" }, all, "select all"), exportLink("csv"), exportLink("json"),
                                  el("span", { className: "muted" }, `exports hold at most ${r.limit} rows, as the search`)) : null,
           messageTable(r.messages, null, { select: true, id: "dlq-list" }),
           r.messages.length ? el("div", { className: "row" }, resend) : null);
    } catch (err) { fill(out, errorBox(err)); }
  });
  c.append(f, out, result);
  main.appendChild(c);
};

// ---- dashboard

pages.dashboard = async (main) => {
  main.appendChild(el("h1", {}, "Dashboard"));
  const totals = el("div", { className: "stats", id: "dash-totals" });
  main.appendChild(totals);
  const brokers = card("Broker TPS (put and get)");
  const topics = card("Topic TPS");
  // the range drawn: offered when the console reads its history from Prometheus (--prometheus-url)
  const range = el("select", { id: "dash-range" }, [["3600", "last hour"], ["21600", "last 6 hours"], ["86400", "last day"],
    ["604800", "last 7 days"], ["2592000", "last 30 days"]].map(([v, t]) => el("option", { value: v }, t)));
  const rangeRow = el("div", { id: "dash-range-row", hidden: true }, el("label", {}, "History: ", range));
  main.append(rangeRow, brokers, topics);
  const bHolder = el("div", {}), tHolder = el("div", {});
  brokers.appendChild(bHolder); topics.appendChild(tHolder);
  const draw = async () => {
    try {
      const [d, cl] = await Promise.all([api("dashboard", { range: range.value }), api("cluster")]);
      const prom = d.source === "prometheus";
      rangeRow.hidden = !prom;
      // the x axis: the range asked of Prometheus; else from the first sample (at least 5 minutes
      // back) to now, at most the hour kept
      let first = Date.now();
      for (const pts of [...Object.values(d.brokers), ...Object.values(d.topics)]) if (pts.length) first = Math.min(first, pts[0][0]);
      const span = prom ? d.range * 1000 : Math.min(d.history * 1000, Math.max(300_000, Date.now() - first));
      const bs = [];
      for (const [name, pts] of Object.entries(d.brokers)) {
        bs.push({ name: name + " put", points: pts.map(x => [x[0], x[1]]) });
        bs.push({ name: name + " get", points: pts.map(x => [x[0], x[2]]) });
      }
      fill(bHolder, lineChart(bs, span, "broker-chart", bHolder.clientWidth));
      const ts = Object.entries(d.topics).map(([name, pts]) => ({ name, points: pts, last: pts.length ? pts[pts.length - 1][1] : 0 }))
        .sort((a, b) => b.last - a.last).slice(0, 10);
      fill(tHolder, lineChart(ts, span, "topic-chart", tHolder.clientWidth),
           d.topicsSkipped ? el("p", { className: "muted" }, `${d.topicsSkipped} more topics are not sampled.`) : null,
           d.lastError ? errorBox(d.lastError) : null,
           el("p", { className: "muted" }, prom ? `From Prometheus: one point every ${d.step} s. The ten busiest topics are drawn.`
             : `One sample every ${d.interval} s (the console's own last hour); ${d.rounds} rounds so far. The ten busiest topics are drawn.`));
      const up = cl.brokers.filter(b => !b.error);
      fill(totals, [["Brokers", cl.brokers.length], ["Put TPS", up.reduce((s, b) => s + b.putTps, 0)], ["Get TPS", up.reduce((s, b) => s + b.getTps, 0)],
                    ["Put today", up.reduce((s, b) => s + b.msgPutTotalTodayNow, 0)], ["Got today", up.reduce((s, b) => s + b.msgGetTotalTodayNow, 0)]]
        .map(([k, v]) => el("div", { className: "stat" }, el("div", { className: "v" }, fmtNum(v)), el("div", { className: "k" }, k))));
    } catch (e) { fill(bHolder, errorBox(e)); }
  };
  range.addEventListener("change", draw);
  await draw();
  every(5000, draw);
};

// ---- message trace (the dashboard's Message Trace page)

// One message's hops on a time axis: a bar per hop from its start for its cost (Pub: the send;
// Sub: one consume attempt, SubBefore's time for SubAfter's cost), coloured by status.
function traceTimeline(m, id) {
  const hops = [];
  if (m.pub) hops.push({ ...m.pub, label: "Pub · " + (m.pub.group || "-") });
  for (const s of m.subs) hops.push({ ...s, label: "Sub · " + s.group + (s.retryTimes ? ` (retry ${s.retryTimes})` : "") });
  for (const t of m.transactions) hops.push({ ...t, label: "EndTransaction · " + t.transactionState });
  const timed = hops.filter(h => h.timestamp > 0);
  if (!timed.length) return el("p", { className: "muted" }, "No timed hop to draw.");
  const t0 = Math.min(...timed.map(h => h.timestamp));
  const t1 = Math.max(...timed.map(h => h.timestamp + Math.max(1, h.costTime)));
  const span = Math.max(1, t1 - t0);
  const W = 900, L = 230, R = 230, row = 26, T = 24, H = T + row * timed.length + 24;
  const X = t => L + (W - L - R) * (t - t0) / span;
  const g = svg("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img", "aria-label": "trace timeline of " + m.msgId });
  for (let i = 0; i <= 4; i++) {
    const x = L + (W - L - R) * i / 4;
    g.appendChild(svg("line", { x1: x, x2: x, y1: T - 6, y2: H - 20, class: "tick" }));
    g.appendChild(svg("text", { x, y: H - 6, "text-anchor": "middle" }, "+" + fmtNum(Math.round(span * i / 4)) + " ms"));
  }
  g.appendChild(svg("text", { x: L, y: 12 }, "from " + fmtTime(t0)));
  timed.forEach((h, i) => {
    const y = T + i * row;
    const x = X(h.timestamp), w = Math.max(3, X(h.timestamp + h.costTime) - x);
    g.appendChild(svg("text", { x: 6, y: y + 14 }, h.label.length > 34 ? h.label.slice(0, 33) + "…" : h.label));
    g.appendChild(svg("rect", { x, y: y + 3, width: w, height: row - 10, rx: 3, class: h.type === "Pub" ? (h.status === "success" ? "pub" : "failed") : h.status, "data-type": h.type }));
    g.appendChild(svg("text", { x: W - R + 8, y: y + 14 }, `${h.costTime} ms · ${h.status} · ${h.clientHost || "?"}`));
  });
  g.appendChild(svg("line", { x1: L, x2: W - R, y1: H - 20, y2: H - 20, class: "axis" }));
  return el("div", { className: "timeline", id: id || null }, g);
}

function traceTable(m) {
  const rows = [];
  if (m.pub) rows.push(m.pub);
  rows.push(...m.subs, ...m.transactions);
  return table([{ key: "type", title: "Type" }, { key: "group", title: "Group" }, { key: "clientHost", title: "Client host", cls: "mono" },
                { key: "timestamp", title: "Time", render: r => fmtTime(r.timestamp) }, { key: "costTime", title: "Cost (ms)", num: true },
                { key: "status", title: "Status", render: r => el("span", { className: "badge " + (r.status === "success" ? "ok" : r.status === "failed" ? "bad" : "warn") }, r.status) },
                { key: "retryTimes", title: "Retry", num: true, render: r => r.retryTimes ?? "" }], rows, { className: "trace-table" });
}

pages.trace = async (main, p) => {
  main.appendChild(el("h1", {}, "Message trace"));
  const c = card(null);
  const out = el("div", { id: "trace-results" });
  const traceTopic = topicInput({ name: "traceTopic", placeholder: "RMQ_SYS_TRACE_TOPIC", value: p.traceTopic || "" });
  const byId = el("input", { name: "msgId", placeholder: "Message id (the client's)", size: 36, value: p.msgId || "" });
  const topic = topicInput({ name: "topic", placeholder: "Topic (optional)", value: p.topic || "" });
  const key = el("input", { name: "key", placeholder: "Message key", value: p.key || "" });
  const run = async params => {
    fill(out, el("p", { className: "muted" }, "Searching…"));
    try {
      const r = await api("trace", { ...params, traceTopic: traceTopic.value.trim() });
      if (!r.messages.length) { fill(out, el("p", { className: "muted", id: "trace-none" }, `No trace in ${r.traceTopic} for this ${params.msgId ? "message id" : "key"}.`)); return; }
      fill(out, r.messages.map((m, i) => card(null,
        el("h2", {}, "Message ", link("message", { id: m.msgId, topic: m.topic }, m.msgId)),
        el("p", { className: "muted" }, [m.topic && `topic ${m.topic}`, m.tags && `tag ${m.tags}`, m.keys && `keys ${m.keys}`].filter(Boolean).join(" · ")),
        traceTimeline(m, "trace-timeline-" + i), traceTable(m))));
    } catch (e) { fill(out, errorBox(e)); }
  };
  const f1 = el("form", { className: "row", id: "trace-by-id" }, el("label", {}, "Message id", byId), el("button", { type: "submit" }, "Trace"));
  f1.addEventListener("submit", ev => { ev.preventDefault(); run({ msgId: byId.value.trim() }); });
  const f2 = el("form", { className: "row", id: "trace-by-key" }, el("label", {}, "Topic", topic), el("label", {}, "Key", key), el("button", { type: "submit" }, "Trace"));
  f2.addEventListener("submit", ev => { ev.preventDefault(); run({ key: key.value.trim(), topic: topic.value.trim() }); });
  c.append(el("div", { className: "row" }, el("label", {}, "Trace topic (empty: RMQ_SYS_TRACE_TOPIC)", traceTopic)), f1, f2);
  main.append(c, out);
  if (p.msgId) run({ msgId: p.msgId });
};

// ---- ACL (admin accounts only; the broker's plain ACL through its admin codes)

const PERMS = ["DENY", "PUB", "SUB", "PUB|SUB"];
function lines(text) { return text.split("\n").map(x => x.trim()).filter(Boolean); }

pages.acl = async (main) => {
  main.appendChild(el("h1", {}, "ACL"));
  if (!session.admin) { main.appendChild(errorBox("The ACL page is for admin accounts.")); return; }
  const top = el("div", { id: "acl-view" });
  // the last write's result: outside the part a reload redraws, so it stays in sight
  const out = el("div", { id: "acl-result" });
  main.append(out, top);
  const load = async () => {
    let a;
    try { a = await api("acl"); } catch (e) { fill(top, errorBox(e)); return; }
    const brokers = card("Brokers", table([{ key: "brokerName", title: "Broker" }, { key: "addr", title: "Address", cls: "mono" },
      { key: "aclEnabled", title: "ACL", render: r => r.aclEnabled ? el("span", { className: "badge ok" }, "on") : el("span", { className: "badge bad" }, "off") },
      { key: "error", title: "Note", cls: "wrap" }], a.brokers, { id: "acl-brokers" }));
    if (!a.enabled) {
      fill(top, el("div", { className: "error", role: "alert", id: "acl-off" }, "ACL is off on every broker (aclEnable=false): there are no accounts to manage. Start the brokers with aclEnable=true and a plain_acl.yml."), brokers);
      return;
    }
    const f = accountForm({}, out, load);
    const accounts = card("Accounts", table([
      { key: "accessKey", title: "Access key", cls: "mono" }, { key: "secretKey", title: "Secret key", cls: "mono" },
      { key: "admin", title: "Admin", render: r => r.admin ? el("span", { className: "badge warn" }, "admin") : "" },
      { key: "whiteRemoteAddress", title: "White address", cls: "mono" },
      { key: "defaultTopicPerm", title: "Topics" }, { key: "defaultGroupPerm", title: "Groups" },
      { title: "Rights", cls: "wrap mono", render: r => [...r.topicPerms, ...r.groupPerms].join(" ") },
      { key: "brokers", title: "Brokers", render: r => r.brokers.join(", ") },
      { title: "", render: r => [el("button", { className: "small secondary", "data-action": "edit", "data-key": r.accessKey, onclick: () => fill(formHolder, accountForm(r, out, load)) }, "Edit"), " ",
                                 el("button", { className: "small danger", "data-action": "delete", "data-key": r.accessKey, onclick: async () => {
                                   if (!confirm(`Delete the ACL account ${r.accessKey} from every broker?`)) return;
                                   try { await post("acl/delete", { accessKey: r.accessKey }); fill(out, notice(`Account ${r.accessKey} deleted.`)); load(); }
                                   catch (e) { fill(out, errorBox(e)); } } }, "Delete")] }],
      a.accounts, { id: "acl-accounts", empty: "No account." }));
    const formHolder = el("div", {}, f);
    const white = el("textarea", { name: "globalWhiteAddrs", id: "acl-white", placeholder: "one address or pattern a line, e.g. 10.10.*.*" }, a.globalWhiteAddrs.join("\n"));
    const whiteOut = el("div", { id: "acl-white-result" });
    const whiteCard = card("Global white list", white, el("div", { className: "row" }, el("button", { id: "acl-white-save", onclick: async () => {
      try { const addrs = await post("acl/white", { addrs: lines(white.value) }); fill(whiteOut, notice(`White list written on ${addrs.join(", ")}.`)); }
      catch (e) { fill(whiteOut, errorBox(e)); } } }, "Save white list")), whiteOut);
    fill(top, brokers, accounts, card("Create or update an account", formHolder), whiteCard);
  };
  await load();
};

function accountForm(a, out, done) {
  const editing = !!a.accessKey;
  const ak = el("input", { name: "accessKey", value: a.accessKey || "", readonly: editing ? true : null, placeholder: "7 characters or more" });
  const sk = el("input", { name: "secretKey", type: "password", autocomplete: "new-password", placeholder: editing ? "unchanged" : "7 characters or more" });
  const admin = el("input", { type: "checkbox", name: "admin", checked: !!a.admin });
  const wra = el("input", { name: "whiteRemoteAddress", value: a.whiteRemoteAddress || "", placeholder: "e.g. 192.168.0.*" });
  const sel = (name, v) => el("select", { name }, PERMS.map(x => el("option", { value: x, selected: x === (v || "DENY") }, x)));
  const dt = sel("defaultTopicPerm", a.defaultTopicPerm), dg = sel("defaultGroupPerm", a.defaultGroupPerm);
  const tp = el("textarea", { name: "topicPerms", placeholder: "TopicA=PUB|SUB (one a line)" }, (a.topicPerms || []).join("\n"));
  const gp = el("textarea", { name: "groupPerms", placeholder: "GroupA=SUB (one a line)" }, (a.groupPerms || []).join("\n"));
  const f = el("form", { id: "acl-form" }, el("div", { className: "row" }, el("label", {}, "Access key", ak), el("label", {}, "Secret key", sk),
      el("label", {}, "White address", wra), el("label", {}, "Default topic right", dt), el("label", {}, "Default group right", dg),
      el("label", { className: "check" }, admin, "admin")),
    el("div", { className: "grid" }, el("label", {}, "Topic rights", tp), el("label", {}, "Group rights", gp)),
    el("div", { className: "row" }, el("button", { type: "submit" }, editing ? "Update account" : "Create account")));
  f.addEventListener("submit", async ev => {
    ev.preventDefault();
    fill(out);
    try {
      const addrs = await post("acl/account", { accessKey: ak.value.trim(), secretKey: sk.value, admin: admin.checked, whiteRemoteAddress: wra.value.trim(),
                                                 defaultTopicPerm: dt.value, defaultGroupPerm: dg.value, topicPerms: lines(tp.value), groupPerms: lines(gp.value) });
      sk.value = "";
      fill(out, notice(`Account ${ak.value.trim()} written on ${addrs.join(", ")}.`));
      await done();
    } catch (e) { fill(out, errorBox(e)); }
  });
  return f;
}

// ---- OPS (the console's own client: name server, VIP channel, TLS)

pages.ops = async (main) => {
  main.appendChild(el("h1", {}, "OPS"));
  const c = card("Name server");
  const opts = card("The console's client");
  main.append(c, opts);
  const out = el("div", { id: "ops-result" });
  const draw = o => {
    const addr = el("input", { name: "namesrvAddr", id: "ops-namesrv", placeholder: "host:port;host:port", size: 40 });
    const f = el("form", { className: "row", id: "ops-namesrv-form" }, el("label", {}, "Switch to", addr), el("button", { type: "submit", disabled: !session.admin }, "Switch"));
    const sw = async a => {
      fill(out, el("p", { className: "muted" }, "Checking " + a + "…"));
      try { const r = await post("ops/namesrv", { namesrvAddr: a }); draw(r); fill(out, notice(`Now using ${r.namesrvAddr}.`));
            api("version").then(v => fill(document.getElementById("namesrv"), `rmq ${v.version} · name server ${v.namesrvAddr}`)).catch(() => {});
            refreshNames(); }
      catch (e) { fill(out, errorBox(e)); }
    };
    f.addEventListener("submit", ev => { ev.preventDefault(); sw(addr.value.trim()); });
    fill(c, el("h2", {}, "Name server"), kvTable({ "In use": o.namesrvAddr }, "ops-current"),
         table([{ key: "addr", title: "Known name servers", cls: "mono" },
                { title: "", render: r => r.addr === o.namesrvAddr ? el("span", { className: "badge ok" }, "in use")
                                        : el("button", { className: "small secondary", "data-action": "use", disabled: !session.admin, onclick: () => sw(r.addr) }, "Use") }],
               o.namesrvAddrs.map(a => ({ addr: a })), { id: "ops-known" }), f, out);
    const vip = el("input", { type: "checkbox", name: "vipChannel", id: "ops-vip", checked: o.vipChannel, disabled: !session.admin });
    const tls = el("input", { type: "checkbox", name: "tls", id: "ops-tls", checked: o.tls, disabled: !session.admin });
    const apply = el("button", { id: "ops-apply", disabled: !session.admin, onclick: async () => {
      fill(out, el("p", { className: "muted" }, "Checking…"));
      try { const r = await post("ops/client", { vipChannel: vip.checked, tls: tls.checked }); draw(r); fill(out, notice(`VIP channel ${r.vipChannel ? "on" : "off"}, TLS ${r.tls ? "on" : "off"}.`)); }
      catch (e) { vip.checked = o.vipChannel; tls.checked = o.tls; fill(out, errorBox(e)); } } }, "Apply");
    fill(opts, el("h2", {}, "The console's client"),
         el("div", { className: "row" }, el("label", { className: "check" }, vip, "VIP channel (broker port − 2)"), el("label", { className: "check" }, tls, "TLS"), apply),
         el("p", { className: "muted" }, "A change is kept only when the cluster answers through it (the name server's broker table, then each master's runtime and consume statistics); otherwise the console stays as it was. rmq brokers answer only their slaves' reads on the VIP port: the VIP channel is for Java brokers."));
  };
  try { draw(await api("ops")); } catch (e) { main.appendChild(errorBox(e)); }
};

// ---- RocketMQ 5: message types, POP consume mode, pending timers

pages.v5 = async (main, p) => {
  main.appendChild(el("h1", {}, "RocketMQ 5"));
  const types = card("Message type per topic (message.type)");
  const modes = card("Consume mode of a group on a topic (PULL or POP)");
  const timers = card("Pending timer messages");
  main.append(types, modes, timers);
  live(types, 0, () => api("v5/types"), rows => table([{ key: "topic", title: "Topic", render: r => link("topic", { name: r.topic }, r.topic) },
    { key: "messageType", title: "Message type", render: r => r.messageType ? el("span", { className: "badge" }, r.messageType) : el("span", { className: "muted" }, "untyped") },
    { key: "brokers", title: "Brokers", render: r => r.brokers.join(", ") }], rows, { id: "v5-types", sortable: true, sortKey: "topic", scroll: true, empty: "No topic." }));
  const topic = topicInput({ name: "topic", placeholder: "Topic", value: p.topic || "" });
  const group = groupInput({ name: "group", placeholder: "Consumer group", value: p.group || "" });
  const mode = el("select", { name: "mode" }, ["POP", "PULL"].map(m => el("option", { value: m }, m)));
  const share = el("input", { type: "number", name: "popShareQueueNum", min: 0, max: 1024, value: 0 });
  const out = el("div", { id: "v5-mode-result" });
  const modeTable = el("div", {});
  const check = async () => {
    try { fill(modeTable, table([{ key: "brokerName", title: "Broker" }, { key: "mode", title: "Mode", render: r => r.error ? el("span", { className: "badge bad" }, r.error) : el("span", { className: "badge" }, r.mode) },
                           { key: "queues", title: "Queues", num: true }], await api("v5/mode", { topic: topic.value.trim(), group: group.value.trim() }), { id: "v5-modes" })); }
    catch (e) { fill(modeTable, errorBox(e)); }
  };
  const f = el("form", { className: "row", id: "v5-mode-form" }, el("label", {}, "Topic", topic), el("label", {}, "Group", group), el("label", {}, "Mode", mode),
               el("label", {}, "POP share queues (0: all)", share), el("button", { type: "submit", disabled: !session.admin }, "Set"),
               el("button", { type: "button", className: "secondary", id: "v5-mode-check", onclick: check }, "Show"));
  f.addEventListener("submit", async ev => {
    ev.preventDefault();
    fill(out);
    try { const addrs = await post("v5/mode", { topic: topic.value.trim(), group: group.value.trim(), mode: mode.value, popShareQueueNum: +share.value });
          fill(out, notice(`${mode.value} set on ${addrs.join(", ")}.`)); await check(); }
    catch (e) { fill(out, errorBox(e)); }
  });
  modes.append(f, out, modeTable);
  live(timers, 5000, () => api("v5/timers"), d => [
    table([{ key: "brokerName", title: "Broker" }, { key: "timerCongestNum", title: "Pending", num: true }, { key: "timerEnqueueTps", title: "Enqueue TPS", num: true },
           { key: "timerDequeueTps", title: "Dequeue TPS", num: true }, { key: "timerReadBehind", title: "Read behind (s)", num: true },
           { key: "error", title: "Note", cls: "wrap" }], d.brokers, { id: "v5-timer-brokers" }),
    table([{ key: "topic", title: "Topic" }, { key: "brokerName", title: "Broker" }, { key: "count", title: "Pending", num: true },
           { key: "lastChange", title: "Last change", render: r => fmtTime(r.lastChange) }], d.topics, { id: "v5-timer-topics", empty: "No pending timer message." })]);
};
