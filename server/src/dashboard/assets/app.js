// tunehub's dashboard: reads the server's /api/* endpoints (the gRPC API's messages as JSON,
// called with this tab's token) and draws jobs, curves, the fleet and records.
//
// Every string from the server is inserted as text (textContent, attribute values), never as
// markup. The views poll while shown; nothing is kept between page loads but the token, in
// this tab's sessionStorage.
'use strict';

const STATES = ['unspecified', 'queued', 'running', 'done', 'failed', 'cancelled'];
const POLL_MS = 2000;
const COLOURS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf', '#8c564b',
  '#e377c2', '#7f7f7f', '#bcbd22'];
// Tasks drawn one line each; a model's other tasks are in its estimate's line.
const LINES = 10;
const SVG = 'http://www.w3.org/2000/svg';

let token = sessionStorage.getItem('tunehub-token') || '';
let me = null;
let poll = null;
// Bumped at each navigation: an answer for a view no longer shown is dropped.
let generation = 0;

// ---- plumbing ----------------------------------------------------------------------------

async function api(path, method = 'GET') {
  const headers = {};
  if (token) headers.Authorization = 'Bearer ' + token;
  const r = await fetch(path, { method, headers, cache: 'no-store' });
  let body = null;
  try {
    body = await r.json();
  } catch (_) {
    body = null;
  }
  if (!r.ok) {
    const e = new Error((body && body.error) || r.status + ' ' + r.statusText);
    e.status = r.status;
    throw e;
  }
  return body;
}

// el('td', {class: 'num', 'data-task': 3}, 'text', childNode, ...)
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function svg(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  return e;
}

function table(id, headings, rows) {
  return el('table', { id },
    el('thead', {}, el('tr', {}, headings.map((h) => el('th', {}, h)))),
    el('tbody', {}, rows));
}

function bar(fraction) {
  const inner = el('span', { class: 'fill' });
  inner.style.width = Math.max(0, Math.min(1, fraction)) * 100 + '%';
  return el('span', { class: 'bar' }, inner);
}

// A time in the unit that shows it: a 29 ns kernel is not "0.0000 ms".
function fmtTime(s) {
  if (s === null || s === undefined || !isFinite(s)) return '';
  if (s === 0) return '0';
  if (s < 1e-6) return (s * 1e9).toPrecision(3) + ' ns';
  if (s < 1e-3) return (s * 1e6).toPrecision(3) + ' µs';
  if (s < 1) return (s * 1e3).toPrecision(3) + ' ms';
  return s.toPrecision(3) + ' s';
}

function fmtAge(ms) {
  if (!ms) return '';
  const s = Math.max(0, (Date.now() - ms) / 1000);
  if (s < 90) return Math.round(s) + ' s ago';
  if (s < 5400) return Math.round(s / 60) + ' min ago';
  if (s < 129600) return Math.round(s / 3600) + ' h ago';
  return Math.round(s / 86400) + ' d ago';
}

function shortKey(k) {
  return k && k.length > 28 ? k.slice(0, 28) + '…' : k || '';
}

function stateName(s) {
  return STATES[s] || String(s);
}

function message(text, cls = 'error') {
  return el('p', { class: cls }, text);
}

// ---- views ---------------------------------------------------------------------------------

async function viewJobs() {
  const r = await api('/api/jobs');
  const rows = (r.jobs || []).map((j) => {
    const budget = j.tasks.reduce((a, t) => a + t.trials, 0);
    const done = j.tasks.reduce((a, t) => a + t.trials_done, 0);
    const noisy = j.tasks.reduce((a, t) => a + t.noisy, 0);
    const est = j.estimate ? fmtTime(j.estimate.seconds) : '';
    return el('tr', { 'data-job': j.id, 'data-state': stateName(j.state) },
      el('td', {}, el('a', { href: '#/job/' + encodeURIComponent(j.id) }, j.id)),
      el('td', {}, j.name),
      el('td', { class: 'state ' + stateName(j.state) }, stateName(j.state)),
      el('td', { title: j.target_key }, shortKey(j.target_key)),
      el('td', { class: 'num' }, j.tasks.length),
      el('td', {}, bar(budget ? done / budget : 0), ' ', done + '/' + budget,
        noisy ? el('span', { class: 'noisy' }, ' (' + noisy + ' noisy)') : null),
      el('td', { class: 'num' }, est),
      el('td', {}, j.owner),
      el('td', {}, fmtAge(Number(j.updated_at_ms))),
      el('td', { class: 'why' }, j.error || j.waiting));
  });
  return [
    el('h2', {}, 'Jobs'),
    rows.length ? table('jobs', ['job', 'name', 'state', 'target', 'tasks', 'trials',
      'estimate', 'owner', 'updated', 'why'], rows)
      : message('No job yet: `tunehub submit` or `tunehub tune` queues one.', 'hint'),
  ];
}

// Best-so-far per task in the order the trials were stored: [trial number, seconds, at_ms].
// Failures and noisy trials are never a best.
function bestSoFar(trials) {
  const points = [];
  let best = Infinity;
  trials.forEach((t, i) => {
    if (t.seconds !== null && t.seconds !== undefined && !t.noisy && t.seconds < best) {
      best = t.seconds;
    }
    if (isFinite(best)) points.push([i + 1, best, Number(t.at_ms)]);
  });
  return points;
}

// The end-to-end estimate (sum of weight x best) against the job's trials, once every task
// has a best: the model's curve.
function estimateCurve(job, tasks) {
  const events = [];
  tasks.forEach((t) => t.trials.forEach((tr, i) => events.push([Number(tr.at_ms), t.task_index, tr, i])));
  events.sort((a, b) => a[0] - b[0] || a[1] - b[1] || a[3] - b[3]);
  const best = new Map();
  const points = [];
  events.forEach(([at, task, tr], n) => {
    if (tr.seconds !== null && tr.seconds !== undefined && !tr.noisy) {
      if (!best.has(task) || tr.seconds < best.get(task)) best.set(task, tr.seconds);
    }
    if (best.size === job.tasks.length) {
      let sum = 0;
      job.tasks.forEach((t, i) => { sum += (t.weight || 1) * best.get(i); });
      points.push([n + 1, sum, at]);
    }
  });
  return points;
}

// A chart of lines [{label, points: [[x, y], ...], colour, task}], y in seconds.
function chart(id, title, xLabel, lines) {
  const W = 640, H = 260, L = 70, R = 10, T = 24, B = 36;
  const all = lines.flatMap((l) => l.points);
  const box = svg('svg', { id, class: 'curve', viewBox: `0 0 ${W} ${H}`, role: 'img' });
  box.append(svg('text', { x: L, y: 16, class: 'title' }));
  box.lastChild.textContent = title;
  if (!all.length) {
    const t = svg('text', { x: W / 2, y: H / 2, 'text-anchor': 'middle', class: 'empty' });
    t.textContent = 'no successful trial yet';
    box.append(t);
    return box;
  }
  const xMax = Math.max(xLabel === 'trials' ? 1 : 1e-9, ...all.map((p) => p[0]));
  // A log scale: a first candidate 100x slower than the best must not flatten the rest.
  let lo = Math.log10(Math.min(...all.map((p) => p[1])));
  let hi = Math.log10(Math.max(...all.map((p) => p[1])));
  if (hi - lo < 0.2) { lo -= 0.1; hi += 0.1; }
  const x = (v) => L + (v / xMax) * (W - L - R);
  const y = (v) => H - B - ((Math.log10(v) - lo) / (hi - lo)) * (H - T - B);
  box.append(svg('line', { x1: L, y1: H - B, x2: W - R, y2: H - B, class: 'axis' }));
  box.append(svg('line', { x1: L, y1: T, x2: L, y2: H - B, class: 'axis' }));
  for (let i = 0; i <= 4; i++) {
    const v = Math.pow(10, lo + ((hi - lo) * i) / 4);
    const t = svg('text', { x: L - 6, y: y(v) + 4, 'text-anchor': 'end', class: 'tick' });
    t.textContent = fmtTime(v);
    box.append(t);
    const u = (xMax * i) / 4;
    const s = svg('text', { x: x(u), y: H - B + 16, 'text-anchor': 'middle', class: 'tick' });
    s.textContent = xLabel === 'trials' ? String(Math.round(u)) : u.toPrecision(2);
    box.append(s);
  }
  const xl = svg('text', { x: (L + W - R) / 2, y: H - 4, 'text-anchor': 'middle', class: 'tick' });
  xl.textContent = xLabel;
  box.append(xl);
  for (const l of lines) {
    // A step line: the best holds until the next improvement.
    const pts = [];
    l.points.forEach(([px, py], i) => {
      if (i > 0) pts.push(`${x(px).toFixed(1)},${y(l.points[i - 1][1]).toFixed(1)}`);
      pts.push(`${x(px).toFixed(1)},${y(py).toFixed(1)}`);
    });
    const line = svg('polyline', {
      points: pts.join(' '), stroke: l.colour, class: 'series',
      'data-task': l.task, 'data-points': l.points.length,
    });
    const tip = svg('title', {});
    tip.textContent = l.label;
    line.append(tip);
    box.append(line);
  }
  return box;
}

function curves(job, tasks) {
  const order = job.tasks.map((t, i) => i)
    .sort((a, b) => (job.tasks[b].share || 0) - (job.tasks[a].share || 0)).slice(0, LINES);
  const created = Number(job.created_at_ms);
  const perTask = order.map((i, n) => ({
    task: i,
    label: `task ${i}: ${job.tasks[i].description}`,
    colour: COLOURS[n % COLOURS.length],
    points: bestSoFar((tasks[i] || { trials: [] }).trials),
  }));
  const byTrials = perTask.map((l) => ({ ...l, points: l.points.map((p) => [p[0], p[1]]) }));
  const lastAt = Math.max(created, ...perTask.flatMap((l) => l.points.map((p) => p[2])));
  // Seconds for a short job, minutes past ten of them.
  const unit = lastAt - created > 600000 ? 60000 : 1000;
  const byTime = perTask.map((l) => ({
    ...l, points: l.points.map((p) => [(p[2] - created) / unit, p[1]]),
  }));
  const out = [
    chart('curve-trials', 'best time per task against its trials', 'trials', byTrials),
    chart('curve-time', 'best time per task against wall time',
      (unit === 1000 ? 'seconds' : 'minutes') + ' since submitted', byTime),
  ];
  if (job.tasks.length > 1) {
    const est = estimateCurve(job, tasks);
    out.unshift(chart('curve-estimate', 'end-to-end estimate (sum of weight × best) against the job\'s trials',
      'trials', [{ task: 'estimate', label: 'estimate', colour: '#000', points: est }]));
  }
  const legend = el('ul', { class: 'legend' }, perTask.map((l) => {
    const swatch = el('span', { class: 'swatch' });
    swatch.style.background = l.colour;
    return el('li', {}, swatch, l.label);
  }));
  return el('div', { id: 'curves' }, out, legend);
}

function cancelButton(job) {
  const st = stateName(job.state);
  if (!me.may.cancel || !(st === 'queued' || st === 'running')) return null;
  if (!me.may.cancel_any && job.owner !== me.name) return null;
  const b = el('button', { id: 'cancel', type: 'button' }, 'Cancel job');
  let armed = false;
  b.addEventListener('click', async () => {
    // Two clicks: a job of hours is not cancelled by a stray one.
    if (!armed) {
      armed = true;
      b.textContent = 'Click again to cancel';
      setTimeout(() => { armed = false; b.textContent = 'Cancel job'; }, 5000);
      return;
    }
    const out = document.getElementById('job-message');
    try {
      const j = await api('/api/jobs/' + encodeURIComponent(job.id) + '/cancel', 'POST');
      out.replaceChildren(message('cancelled: the job is ' + stateName(j.state), 'hint'));
    } catch (e) {
      out.replaceChildren(message(e.message));
    }
  });
  return b;
}

async function viewJob(id) {
  const r = await api('/api/jobs/' + encodeURIComponent(id));
  const j = r.job;
  const rows = j.tasks.map((t, i) => el('tr', { 'data-task': i },
    el('td', { class: 'num' }, i),
    el('td', { class: 'desc' }, t.description),
    el('td', { class: 'num' }, t.weight),
    el('td', {}, bar(t.trials ? t.trials_done / t.trials : 0), ' ', t.trials_done + '/' + t.trials),
    el('td', { class: 'num' }, t.ok - t.noisy),
    el('td', { class: 'num noisy' }, t.noisy || ''),
    el('td', { class: 'num' }, t.errors || ''),
    el('td', { class: 'num' }, fmtTime(t.best_seconds)),
    el('td', { class: 'num' }, t.best_gflops ? t.best_gflops.toFixed(1) : ''),
    el('td', {}, t.share !== null && t.share !== undefined
      ? [bar(t.share), ' ', (t.share * 100).toFixed(1) + '%'] : ''),
    el('td', { class: 'why' }, t.exhausted ? 'search space exhausted' : t.last_error)));
  const facts = [
    ['state', stateName(j.state)], ['target', j.target_key], ['owner', j.owner],
    ['cost model', j.model || j.cost_model], ['estimate', j.estimate
      ? fmtTime(j.estimate.seconds) + (j.estimate.missing ? ` (${j.estimate.missing} tasks without a best)` : '') : ''],
    ['created', new Date(Number(j.created_at_ms)).toLocaleString()],
    ['why', j.error || j.waiting],
  ].filter(([, v]) => v);
  return [
    el('h2', {}, 'Job ', el('span', { id: 'job-id' }, j.id), ' ', j.name ? '(' + j.name + ')' : ''),
    el('dl', { id: 'job-facts' }, facts.map(([k, v]) => [el('dt', {}, k), el('dd', { 'data-fact': k }, v)])),
    el('p', {}, cancelButton(j)),
    el('div', { id: 'job-message' }),
    curves(j, r.tasks),
    el('h3', {}, 'Tasks'),
    table('tasks', ['#', 'workload', 'weight', 'trials', 'ok', 'noisy', 'errors', 'best',
      'GFLOP/s', 'share of latency', 'note'], rows),
  ];
}

async function viewFleet() {
  const r = await api('/api/workers');
  const workers = r.workers || [];
  const pools = new Map();
  for (const w of workers) {
    const p = pools.get(w.target_key) || {};
    p[w.status] = (p[w.status] || 0) + 1;
    pools.set(w.target_key, p);
  }
  for (const k of Object.keys(r.queued || {})) if (!pools.has(k)) pools.set(k, {});
  const poolRows = [...pools.entries()].map(([k, p]) => el('tr', { 'data-pool': k },
    el('td', { title: k }, shortKey(k)),
    ['idle', 'busy', 'offline', 'quarantined'].map((s) => el('td', { class: 'num' }, p[s] || '')),
    el('td', { class: 'num' }, (r.queued || {})[k] || '')));
  const rows = workers.map((w) => el('tr', { 'data-worker': w.id, 'data-status': w.status },
    el('td', {}, w.device_id),
    el('td', {}, w.id),
    el('td', { title: w.target_key }, shortKey(w.target_key)),
    el('td', { class: 'state ' + w.status }, w.status),
    el('td', {}, fmtAge(Number(w.last_heartbeat_ms))),
    el('td', { class: 'num' }, w.measured),
    el('td', { class: 'num' }, w.errors || ''),
    el('td', { class: 'reason' }, w.quarantine_reason)));
  return [
    el('h2', {}, 'Fleet'),
    workers.length || pools.size ? [
      table('pools', ['pool (target)', 'idle', 'busy', 'offline', 'quarantined', 'pieces queued'], poolRows),
      el('h3', {}, 'Workers'),
      table('workers', ['device', 'worker', 'pool', 'status', 'heartbeat', 'measured', 'errors',
        'quarantined because'], rows),
    ] : message('No worker has registered: this server measures on its own machine.', 'hint'),
  ];
}

let recordsFilter = '';

async function viewRecords() {
  const r = await api('/api/records');
  const filter = el('input', { id: 'filter', type: 'search', placeholder: 'filter workloads',
    value: recordsFilter });
  const body = el('tbody', {});
  const fill = () => {
    const f = recordsFilter.toLowerCase();
    body.replaceChildren(...(r.workloads || [])
      .filter((w) => !f || w.description.toLowerCase().includes(f) || w.target_key.toLowerCase().includes(f))
      .slice(0, 500)
      .map((w) => el('tr', { 'data-workload': w.workload_key },
        el('td', { class: 'desc' }, w.description),
        el('td', { title: w.target_key }, shortKey(w.target_key)),
        el('td', { class: 'num' }, w.trials),
        el('td', { class: 'num' }, w.ok - w.noisy),
        el('td', { class: 'num noisy' }, w.noisy || ''),
        el('td', { class: 'num' }, w.best_gflops ? w.best_gflops.toFixed(1) : ''),
        el('td', {}, w.best_gflops ? el('a', {
          href: '#/kernel/' + encodeURIComponent(w.target_key) + '/' + encodeURIComponent(w.workload_key),
        }, 'kernel') : ''))));
  };
  filter.addEventListener('input', () => { recordsFilter = filter.value; fill(); });
  fill();
  return [
    el('h2', {}, 'Records'),
    el('p', {}, (r.targets || []).length + ' targets, ' + (r.workloads || []).length +
      ' workloads tuned. ', filter),
    el('table', { id: 'records' }, el('thead', {}, el('tr', {},
      ['workload', 'target', 'trials', 'ok', 'noisy', 'best GFLOP/s', ''].map((h) => el('th', {}, h)))), body),
  ];
}

async function viewKernel(target, workload) {
  const r = await api('/api/kernel/' + encodeURIComponent(target) + '/' + encodeURIComponent(workload));
  const k = r.kernel || {};
  const rows = (k.args || []).map((a) => el('tr', {},
    el('td', {}, a.name), el('td', {}, a.role), el('td', {}, a.dtype),
    el('td', {}, '[' + a.shape.join(', ') + ']'), el('td', { class: 'num' }, a.alignment),
    el('td', {}, a.pack_function ? a.pack_function + ' → ' + a.packed_elements + ' floats' : '')));
  const facts = [
    ['workload', r.description], ['target', k.target_key], ['record', k.record_id],
    ['GFLOP/s', k.gflops ? k.gflops.toFixed(1) : ''],
    ['records', r.records_ok + ' ok of ' + r.records_total],
    ['symbol', k.symbol], ['compiler', (k.compiler || '') + ' (' + (k.compiler_version || '') + ')'],
    ['cflags', (k.cflags || []).join(' ')], ['ldflags', (k.ldflags || []).join(' ')],
    ['threads', k.threads + ' (' + k.set_num_threads + '(n) changes it)'],
  ].filter(([, v]) => v);
  return [
    el('h2', {}, 'Kernel'),
    el('dl', { id: 'kernel-facts' }, facts.map(([a, b]) => [el('dt', {}, a), el('dd', {}, b)])),
    el('h3', {}, 'Contract'),
    table('args', ['argument', 'role', 'dtype', 'shape', 'alignment', 'packed by'], rows),
    el('h3', {}, 'Header'), el('pre', { id: 'kernel-header' }, k.header),
    el('h3', {}, 'Source'), el('pre', { id: 'kernel-source' }, k.source),
  ];
}

// ---- routing, polling, sign-in ----------------------------------------------------------------

function route() {
  const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  switch (parts[0]) {
    case 'job': return { view: () => viewJob(parts[1]), nav: 'jobs', live: true };
    case 'fleet': return { view: viewFleet, nav: 'fleet', live: true };
    case 'records': return { view: viewRecords, nav: 'records', live: false };
    case 'kernel': return { view: () => viewKernel(parts[1], parts[2]), nav: 'records', live: false };
    default: return { view: viewJobs, nav: 'jobs', live: true };
  }
}

async function render() {
  const mine = ++generation;
  clearTimeout(poll);
  const r = route();
  for (const a of document.querySelectorAll('nav a')) {
    a.classList.toggle('here', a.id === 'nav-' + r.nav);
  }
  const view = document.getElementById('view');
  try {
    const content = await r.view();
    if (mine !== generation) return;
    view.replaceChildren(...[content].flat(2).filter(Boolean));
    view.dataset.loaded = String(Date.now());
  } catch (e) {
    if (mine !== generation) return;
    if (e.status === 401) {
      signIn(e.message);
      return;
    }
    view.replaceChildren(message(e.message));
  }
  if (r.live) poll = setTimeout(() => { if (mine === generation) render(); }, POLL_MS);
}

async function health() {
  const h = document.getElementById('health');
  try {
    const s = await api('/api/health');
    h.className = 'health ' + (s.serving ? 'ok' : 'bad');
    h.textContent = (s.serving ? 'serving' : 'NOT SERVING: ' + s.database) + ' · ' + s.instance +
      ' · v' + s.version + ' · up ' + Math.round(s.uptime_s / 60) + ' min';
    h.title = 'database: ' + s.database + '; local target ' + s.target_key + '; jobs ' +
      JSON.stringify(s.jobs);
  } catch (e) {
    h.className = 'health bad';
    h.textContent = 'no answer: ' + e.message;
  }
}

function signIn(why) {
  me = null;
  clearTimeout(poll);
  document.getElementById('view').replaceChildren();
  document.getElementById('login').hidden = false;
  document.getElementById('signout').hidden = true;
  document.getElementById('whoami').textContent = '';
  document.getElementById('health').textContent = '';
  // A signed-out token does not stay in the form.
  document.getElementById('token').value = '';
  document.getElementById('login-error').textContent = token ? why : '';
  document.getElementById('token').focus();
}

async function start() {
  try {
    me = await api('/api/whoami');
  } catch (e) {
    if (e.status === 401) {
      signIn(e.message);
      return;
    }
    document.getElementById('view').replaceChildren(message('the server does not answer: ' + e.message));
    return;
  }
  document.getElementById('login').hidden = true;
  document.getElementById('signout').hidden = false;
  document.getElementById('whoami').textContent = me.name + ' (' + me.role + ')';
  document.getElementById('nav-fleet').hidden = !me.may.workers;
  document.getElementById('nav-records').hidden = !me.may.records;
  document.getElementById('nav-jobs').hidden = !me.may.jobs;
  health();
  render();
}

document.addEventListener('DOMContentLoaded', () => {
  document.getElementById('login-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    token = document.getElementById('token').value.trim();
    sessionStorage.setItem('tunehub-token', token);
    start();
  });
  document.getElementById('signout').addEventListener('click', () => {
    token = '';
    sessionStorage.removeItem('tunehub-token');
    signIn('');
  });
  window.addEventListener('hashchange', () => { if (me) render(); });
  setInterval(() => { if (me) health(); }, 5000);
  start();
});
