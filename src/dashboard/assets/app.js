// The dashboard page. Everything that came from users (ids, payloads, error messages, task ids) is written with
// textContent, never as markup. A token given as `#token=…` in the address stays in this tab (sessionStorage) and
// goes with every request as `Authorization: Bearer`; the address loses it at once.
'use strict';

(() => {
  const STATES = ['ready', 'unacked', 'pending', 'delayed', 'failed'];
  const $ = (id) => document.getElementById(id);
  const view = { state: 'failed', cursor: undefined, selected: undefined, task: undefined, writable: false };

  const hash = new URLSearchParams(location.hash.slice(1));
  if (hash.get('token')) {
    sessionStorage.setItem('tickpool-token', hash.get('token'));
    history.replaceState(null, '', location.pathname + location.search);
  }
  const token = sessionStorage.getItem('tickpool-token');
  const headers = () => (token ? { Authorization: `Bearer ${token}` } : {});

  async function api(path, method = 'GET') {
    const res = await fetch(`api/${path}`, { method, headers: headers() });
    const body = await res.json();
    if (!res.ok) throw new Error(body.error?.message ?? `HTTP ${res.status}`);
    return body;
  }

  function el(tag, text, attrs = {}) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    return node;
  }

  function row(cells, attrs = {}) {
    const tr = el('tr', undefined, attrs);
    for (const cell of cells) {
      const td = el('td');
      if (cell instanceof Node) td.append(cell);
      else td.textContent = cell === undefined || cell === null ? '' : String(cell);
      tr.append(td);
    }
    return tr;
  }

  function button(label, test, onClick) {
    const b = el('button', label, { 'data-test': test });
    b.disabled = !view.writable;
    b.addEventListener('click', async (event) => {
      event.stopPropagation();
      b.disabled = true;
      try {
        await onClick();
        status('');
      } catch (error) {
        status(error.message, true);
      } finally {
        b.disabled = !view.writable;
        refresh();
      }
    });
    return b;
  }

  function status(text, error = false) {
    $('status').textContent = text;
    $('status').className = error ? 'error' : '';
  }

  const time = (ms) => (ms === undefined || ms === null ? '' : new Date(ms).toLocaleTimeString());
  const enc = encodeURIComponent;

  // ── charts ─────────────────────────────────────────────────────────────────────────────────────────────────
  const charts = {};
  function chart(id, series) {
    const node = $(id);
    const opts = { width: Math.max(320, node.clientWidth || 480), height: 180, series: [{}, ...series], axes: [{}, {}], legend: { show: true } };
    return new uPlot(opts, [[], ...series.map(() => [])], node);
  }
  function draw(points) {
    if (typeof uPlot === 'undefined') return;
    charts.throughput ??= chart('chart-throughput', [{ label: 'per second', stroke: '#3366cc' }]);
    charts.latency ??= chart('chart-latency', [{ label: 'p50', stroke: '#2b9348' }, { label: 'p99', stroke: '#d00000' }]);
    const xs = points.map((p) => p.at / 1000);
    charts.throughput.setData([xs, points.map((p) => p.throughput)]);
    charts.latency.setData([xs, points.map((p) => p.p50Ms ?? null), points.map((p) => p.p99Ms ?? null)]);
  }

  // ── overview: totals, queues, threads, processes ───────────────────────────────────────────────────────────
  function renderOverview(o) {
    const totals = $('totals');
    totals.replaceChildren();
    const count = (n) => (n >= o.cap ? `${n.toLocaleString('en')}+` : String(n));
    for (const [name, value] of Object.entries(o.totals)) {
      const box = el('div', undefined, { 'data-test': `total-${name}` });
      box.append(el('span', name), el('b', count(value)));
      totals.append(box);
    }
    draw(o.series);
    const paused = new Set(o.paused);
    const types = new Set([...Object.keys(o.byType), ...paused]);
    const queues = $('queues').tBodies[0];
    queues.replaceChildren();
    for (const type of [...types].sort()) {
      const counts = o.byType[type] ?? { ready: 0, unacked: 0 };
      const isPaused = paused.has(type);
      const action = isPaused
        ? button('resume', `resume-${type}`, () => api(`types/${enc(type)}/resume`, 'POST'))
        : button('pause', `pause-${type}`, () => api(`types/${enc(type)}/pause`, 'POST'));
      queues.append(row([type, count(counts.ready), count(counts.unacked), el('span', isPaused ? 'paused' : 'running', { class: isPaused ? 'paused' : '' }), action], { 'data-test': `queue-${type}` }));
    }
    const threads = $('threads').tBodies[0];
    threads.replaceChildren();
    for (const t of o.threads) {
      const running = t.running;
      const cancel = running ? button('cancel', `cancel-${t.index}`, () => api(`threads/${t.index}/cancel`, 'POST')) : '';
      const state = !t.ready ? 'starting' : running ? 'running' : t.parked ? 'idle' : 'busy';
      threads.append(row([t.index, state, running ? `${running.kind} ${running.name} ${running.id}` : '', running ? time(running.startedAt) : '', running ? `${running.predictedMs.toFixed(1)} ms` : '', cancel], { 'data-test': `thread-${t.index}` }));
    }
    const processes = $('processes').tBodies[0];
    processes.replaceChildren();
    for (const p of o.processes) processes.append(row([p.host, p.pid, p.threads, time(p.lastSeen), p.claimedTasks.join(', ')]));
  }

  // ── evaluations ────────────────────────────────────────────────────────────────────────────────────────────
  function renderStates() {
    const nav = $('states');
    nav.replaceChildren();
    for (const state of STATES) {
      const b = el('button', state, { 'data-test': `state-${state}`, class: state === view.state ? 'active' : '' });
      b.addEventListener('click', () => {
        view.state = state;
        view.cursor = undefined;
        renderStates();
        refresh();
      });
      nav.append(b);
    }
  }

  async function refreshEvaluations() {
    const page = await api(`evaluations?state=${view.state}&limit=50${view.cursor ? `&cursor=${enc(view.cursor)}` : ''}`);
    const body = $('evaluations').tBodies[0];
    body.replaceChildren();
    for (const e of page.items) {
      const tr = row([e.id, e.type, e.jobId, e.priority, e.deliveries], { 'data-test': `eval-${e.id}`, class: `clickable${e.id === view.selected ? ' selected' : ''}` });
      tr.addEventListener('click', () => {
        view.selected = e.id;
        refreshDetail();
      });
      body.append(tr);
    }
    $('more').hidden = page.nextCursor === undefined;
    $('more').onclick = () => {
      view.cursor = page.nextCursor;
      refresh();
    };
  }

  async function refreshDetail() {
    const box = $('detail');
    if (view.selected === undefined) return box.replaceChildren();
    let d;
    try {
      d = await api(`evaluations/${enc(view.selected)}`);
    } catch {
      box.replaceChildren(el('p', `${view.selected}: not held by the broker any more (acked or removed)`, { 'data-test': 'detail-gone' }));
      return;
    }
    const dl = el('dl');
    const add = (k, v) => dl.append(el('dt', k), el('dd', v ?? '', { 'data-test': `detail-${k}` }));
    add('id', d.id);
    add('state', d.state);
    add('queue', d.queue);
    add('type', d.type);
    add('job', `${d.namespace}/${d.jobId}`);
    add('deliveries', d.deliveries);
    add('error', d.lastError ? `${d.lastError.name}${d.lastError.code ? ` (${d.lastError.code})` : ''}: ${d.lastError.message}` : '');
    add('failure', d.failure ? `${d.failure.name}${d.failure.code ? ` (${d.failure.code})` : ''}: ${d.failure.message}` : '');
    const history = el('table', undefined, { 'data-test': 'detail-history' });
    history.append(row(['started', 'ended', 'end', 'error', 'process']));
    for (const h of d.history) history.append(row([time(h.startedAt), time(h.endedAt), h.end ?? 'running', h.error ? h.error.message : '', h.process]));
    const actions = el('div');
    if (d.state === 'failed') actions.append(button('replay', 'replay', () => api(`evaluations/${enc(d.id)}/replay`, 'POST')));
    if (d.state !== 'unacked') actions.append(button('discard', 'discard', () => api(`evaluations/${enc(d.id)}/discard`, 'POST')));
    box.replaceChildren(dl, el('h3', 'deliveries'), history, el('h3', 'payload'), el('pre', d.payloadText, { 'data-test': 'detail-payload' }), actions);
  }

  // ── tasks ──────────────────────────────────────────────────────────────────────────────────────────────────
  async function refreshTasks() {
    const tasks = await api('tasks');
    const body = $('tasks').tBodies[0];
    body.replaceChildren();
    for (const t of tasks) {
      const schedule = t.schedule.cron ? `cron ${t.schedule.cron}` : `every ${t.schedule.every} ms`;
      const actions = el('span');
      // A run is forced by the process that claims the task: elsewhere the button says who does.
      const claimedElsewhere = t.claimedBy && view.self && (t.claimedBy.host !== view.self.host || t.claimedBy.pid !== view.self.pid);
      const run = button('run now', `run-${t.id}`, () => api(`tasks/${enc(t.id)}/run`, 'POST'));
      if (claimedElsewhere) {
        run.disabled = true;
        run.title = `claimed by ${t.claimedBy.host}/${t.claimedBy.pid}: force its run there`;
      }
      actions.append(
        run,
        t.enabled ? button('disable', `disable-${t.id}`, () => api(`tasks/${enc(t.id)}/disable`, 'POST')) : button('enable', `enable-${t.id}`, () => api(`tasks/${enc(t.id)}/enable`, 'POST')),
      );
      const owner = t.claimedBy ? `${t.claimedBy.host}/${t.claimedBy.pid}` : t.enabled ? '' : '—';
      const tr = row([t.id, schedule, owner, time(t.nextDue), t.lastRun ? `${t.lastRun.finalStatus ?? t.lastRun.status} ${time(t.lastRun.scheduledFor)}` : '', `${t.slotsBusy} / ${t.maxConcurrency}`, t.enabled ? 'yes' : 'no', actions], { 'data-test': `task-${t.id}`, class: 'clickable' });
      tr.addEventListener('click', () => {
        view.task = t.id;
        refreshTaskDetail();
      });
      body.append(tr);
    }
  }

  async function refreshTaskDetail() {
    const box = $('task-detail');
    if (view.task === undefined) return;
    let t;
    try {
      t = await api(`tasks/${enc(view.task)}`);
    } catch {
      box.replaceChildren(el('p', `${view.task}: no such task`));
      return;
    }
    const log = el('table', undefined, { 'data-test': 'run-log' });
    log.append(row(['run', 'scheduled for', 'status', 'attempts', 'error']));
    for (const r of t.runs) log.append(row([r.runId, time(r.scheduledFor), r.finalStatus ?? r.status, r.attempts, r.error ? r.error.message : ''], { 'data-test': `run-${r.runId}` }));
    box.replaceChildren(el('h3', `run log of ${t.id}`), log);
  }

  // ── the loop ───────────────────────────────────────────────────────────────────────────────────────────────
  let busy = false;
  async function refresh() {
    if (busy) return;
    busy = true;
    try {
      renderOverview(await api('overview'));
      await refreshEvaluations();
      await refreshDetail();
      await refreshTasks();
      await refreshTaskDetail();
      document.body.dataset.refreshed = String(Date.now());
    } catch (error) {
      status(error.message, true);
    } finally {
      busy = false;
    }
  }

  async function start() {
    const session = await api('session');
    view.writable = session.writable;
    view.self = session.process;
    $('session').textContent = session.writable ? `can change things (as ${session.by})` : 'read-only';
    $('session').className = session.writable ? 'writable' : '';
    renderStates();
    await refresh();
    setInterval(refresh, 1000);
  }
  start().catch((error) => status(error.message, true));
})();
