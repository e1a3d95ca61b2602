import { h, s, replace, fmtTime, fmtDuration } from './dom.js';
import * as api from './api.js';
import { coreValue, display } from './quantity.js';

const main = document.getElementById('main');
const errorBox = document.getElementById('error');
const PAGE = 50;

// ---- state kept in the address: the view in the hash, ?at= in the query.

function atParam() { return new URLSearchParams(location.search).get('at') || ''; }

function setAt(v) {
  const q = new URLSearchParams(location.search);
  if (v) q.set('at', v); else q.delete('at');
  const search = q.toString() ? '?' + q : '';
  history.pushState(null, '', location.pathname + search + location.hash);
  render();
}

function route() {
  const hash = location.hash.replace(/^#\/?/, '');
  const [path, query] = hash.split('?');
  return { parts: path.split('/').filter(Boolean).map(decodeURIComponent), params: new URLSearchParams(query || '') };
}

function link(parts, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v !== undefined && v !== null && v !== '') q.set(k, v);
  return '#/' + parts.map(encodeURIComponent).join('/') + (q.toString() ? '?' + q : '');
}

function showError(err) {
  if (!err) { errorBox.hidden = true; errorBox.textContent = ''; return; }
  errorBox.hidden = false;
  errorBox.textContent = err.status === 401
    ? 'Not authenticated: give a bearer token (jqctl dev keeps one in <data-dir>/auth/admin.token). ' + err.message
    : String(err.message || err);
}

// ---- usage of ClusterQueues and cohorts

// cells reads a ClusterQueue's spec and usage into per flavor/resource
// figures in the core's units.
function cells(cq) {
  const out = new Map();
  for (const rg of (cq.spec && cq.spec.resourceGroups) || []) {
    for (const f of rg.flavors || []) {
      for (const r of f.resources || []) {
        const c = { flavor: f.name, resource: r.name, nominal: coreValue(r.name, r.nominalQuota), used: 0,
          lendingLimit: r.lendingLimit !== undefined ? coreValue(r.name, r.lendingLimit) : Infinity, lent: 0 };
        out.set(f.name + '/' + r.name, c);
      }
    }
  }
  for (const u of cq.usage || []) {
    const k = u.flavor + '/' + u.resource;
    const c = out.get(k) || { flavor: u.flavor, resource: u.resource, nominal: u.nominal || 0, used: 0, lendingLimit: Infinity, lent: 0 };
    c.used = u.used;
    out.set(k, c);
  }
  for (const c of out.values()) c.borrowed = Math.max(0, c.used - c.nominal);
  return out;
}

// lend spreads each cell's borrowing in a cohort over the members' unused
// nominal quota (up to their lendingLimit), in name order: the quota the
// borrowers use must come from someone's unused share.
function lend(members) {
  const keys = new Set();
  for (const m of members) for (const k of m.cells.keys()) keys.add(k);
  for (const k of keys) {
    let need = 0;
    for (const m of members) { const c = m.cells.get(k); if (c) need += c.borrowed; }
    for (const m of members) {
      const c = m.cells.get(k);
      if (!c || need <= 0) continue;
      const spare = Math.max(0, Math.min(c.nominal - c.used, c.lendingLimit));
      c.lent = Math.min(spare, need);
      need -= c.lent;
    }
  }
}

function usageBars(cellMap, testid) {
  const rows = [];
  for (const c of [...cellMap.values()].sort((a, b) => (a.flavor + a.resource).localeCompare(b.flavor + b.resource))) {
    const scale = Math.max(c.nominal, c.used + c.lent, 1);
    const pct = (v) => (100 * v) / scale + '%';
    const inNominal = Math.min(c.used, c.nominal);
    const bar = h('div', { class: 'bar', title: c.flavor + '/' + c.resource },
      h('span', { class: 'nominal', style: `left:0;width:${pct(c.nominal)}` }),
      h('span', { class: 'used', style: `left:0;width:${pct(inNominal)}` }),
      h('span', { class: 'lent', style: `left:${pct(inNominal)};width:${pct(c.lent)}` }),
      h('span', { class: 'borrowed', style: `left:${pct(c.nominal)};width:${pct(c.borrowed)}` }));
    const r = c.resource;
    rows.push(h('div', { 'data-testid': testid, 'data-cell': c.flavor + '/' + r }, c.flavor + ' / ' + r), bar,
      h('div', { class: 'small' }, `reserved ${display(r, c.used)} of nominal ${display(r, c.nominal)}`,
        c.borrowed ? ` · borrowed ${display(r, c.borrowed)}` : '', c.lent ? ` · lent ${display(r, c.lent)}` : ''));
  }
  if (rows.length === 0) return h('p', { class: 'muted' }, 'No quota.');
  return h('div', { class: 'bars' }, rows);
}

const legend = h('p', { class: 'legend small' },
  h('span', {}, h('i', { style: 'background:var(--used)' }), 'reserved (within nominal)'),
  h('span', {}, h('i', { style: 'background:var(--borrowed)' }), 'borrowed (beyond nominal)'),
  h('span', {}, h('i', { style: 'background:var(--lent)' }), 'lent to the cohort'),
  h('span', {}, h('i', { style: 'border:1px solid #111827;background:var(--free)' }), 'nominal'));

async function queuesView() {
  const at = atParam();
  const data = await api.get('/v1/clusterqueues', { at });
  const cqs = (data.items || []).map((cq) => ({ ...cq, cells: cells(cq), cohort: (cq.spec && cq.spec.cohort) || '' }));
  const cohorts = new Map();
  for (const cq of cqs) {
    if (!cq.cohort) continue;
    if (!cohorts.has(cq.cohort)) cohorts.set(cq.cohort, []);
    cohorts.get(cq.cohort).push(cq);
  }
  for (const members of cohorts.values()) lend(members);
  const cohortCards = [...cohorts.entries()].sort().map(([name, members]) => {
    const sum = new Map();
    for (const m of members) {
      for (const [k, c] of m.cells) {
        const t = sum.get(k) || { flavor: c.flavor, resource: c.resource, nominal: 0, used: 0, borrowed: 0, lent: 0 };
        t.nominal += c.nominal; t.used += c.used;
        sum.set(k, t);
      }
    }
    for (const t of sum.values()) t.borrowed = Math.max(0, t.used - t.nominal);
    return h('div', { class: 'card', 'data-testid': 'cohort', 'data-name': name },
      h('h2', {}, 'Cohort ' + name, h('span', { class: 'muted small' }, ' · ' + members.map((m) => m.name).join(', '))),
      usageBars(sum, 'cohort-cell'));
  });
  const cqCards = cqs.map((cq) => h('div', { class: 'card', 'data-testid': 'clusterqueue', 'data-name': cq.name },
    h('h2', {}, cq.name, h('span', { class: 'muted small' },
      (cq.cohort ? ' · cohort ' + cq.cohort : '') + ` · ${cq.admitted} admitted · `),
    h('a', { href: link(['pending'], { cq: cq.name }), class: 'small' }, `${cq.pending} pending`)),
    usageBars(cq.cells, 'cq-cell')));
  return [h('h1', {}, 'ClusterQueues', at ? h('span', { class: 'muted small' }, ' as of ' + at) : ''), legend,
    cohortCards.length ? [h('h2', {}, 'Cohorts'), cohortCards] : '', h('h2', {}, 'ClusterQueues'),
    cqCards.length ? cqCards : h('p', { class: 'muted' }, 'No ClusterQueue.')];
}

// ---- pending workloads with reason, position and ETA

function etaText(e) {
  if (!e) return '-';
  if (!e.at) return 'unknown';
  return fmtTime(e.at) + (e.waitSeconds !== undefined ? ' (in ' + fmtDuration(e.waitSeconds) + ')' : '');
}

function filterForm(fields, params, target) {
  const inputs = {};
  const form = h('form', { class: 'filters', onsubmit: (ev) => {
    ev.preventDefault();
    const p = {};
    for (const [k, el] of Object.entries(inputs)) p[k] = el.value.trim();
    location.hash = link(target, p);
  } });
  for (const [k, label, options] of fields) {
    let el;
    if (options) {
      el = h('select', { name: k }, h('option', { value: '' }, 'any'), options.map((o) => h('option', { value: o }, o)));
    } else {
      el = h('input', { name: k, size: 16 });
    }
    el.value = params.get(k) || '';
    inputs[k] = el;
    form.append(h('label', {}, label, el));
  }
  form.append(h('button', { type: 'submit' }, 'Filter'));
  return form;
}

async function pendingView(params) {
  const at = atParam();
  const offset = Math.max(0, parseInt(params.get('offset') || '0', 10) || 0);
  const q = { clusterQueue: params.get('cq'), namespace: params.get('ns'), localQueue: params.get('lq'), limit: PAGE, offset, at };
  const data = await api.get('/v1/eta', q);
  const rows = data.items.map((it) => h('tr', { 'data-testid': 'pending-row', 'data-name': it.namespace + '/' + it.name },
    h('td', {}, String(it.positionInClusterQueue)),
    h('td', {}, h('a', { href: link(['workload', it.namespace, it.name]) }, it.namespace + '/' + it.name)),
    h('td', {}, it.clusterQueue || '-'), h('td', {}, String(it.priority)),
    h('td', {}, it.reason || '-', it.message ? h('div', { class: 'small muted' }, it.message) : ''),
    h('td', { 'data-testid': 'eta' }, etaText(it.eta)),
    h('td', { class: 'small' }, it.eta ? it.eta.assumption : '')));
  const keep = { cq: params.get('cq'), ns: params.get('ns'), lq: params.get('lq') };
  const pager = h('div', { class: 'pager' },
    offset > 0 ? h('a', { href: link(['pending'], { ...keep, offset: Math.max(0, offset - PAGE) }) }, '← previous') : '',
    h('span', { class: 'muted', 'data-testid': 'pending-total' }, `${data.total ? offset + 1 : 0}–${offset + data.items.length} of ${data.total}`),
    offset + PAGE < data.total ? h('a', { href: link(['pending'], { ...keep, offset: offset + PAGE }) }, 'next →') : '');
  return [h('h1', {}, 'Pending workloads', at ? h('span', { class: 'muted small' }, ' as of ' + at) : ''),
    filterForm([['cq', 'ClusterQueue'], ['ns', 'Namespace'], ['lq', 'LocalQueue']], params, ['pending']),
    h('p', { class: 'small muted' }, 'In each ClusterQueue\'s order (priority, then creation). The ETA runs the scheduler forward on the expected run times of the admitted workloads' +
      (data.unknownRuns ? `; ${data.unknownRuns} admitted run(s) have no known run time.` : '.')),
    pager,
    h('table', {}, h('thead', {}, h('tr', {}, ['#', 'Workload', 'ClusterQueue', 'Priority', 'Reason', 'ETA', 'Assumption'].map((t) => h('th', {}, t)))),
      h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { colspan: 7, class: 'muted' }, 'No pending workload.')))),
    pager.cloneNode(true)];
}

// ---- all workloads, keyset paged

async function workloadsView(params) {
  const at = atParam();
  const after = params.get('after') || '';
  const back = params.get('back') ? params.get('back').split(',') : [];
  const q = { status: params.get('status'), namespace: params.get('ns'), clusterQueue: params.get('cq'), limit: PAGE, after, at };
  const data = await api.get('/v1/workloads', q);
  const keep = { status: params.get('status'), ns: params.get('ns'), cq: params.get('cq') };
  const rows = data.items.map((w) => h('tr', { 'data-testid': 'workload-row' },
    h('td', {}, h('a', { href: link(['workload', w.namespace, w.name]) }, w.namespace + '/' + w.name)),
    h('td', {}, h('span', { class: 'tag ' + w.status }, w.status)), h('td', {}, w.localQueue || '-'),
    h('td', {}, w.clusterQueue || '-'), h('td', {}, String(w.priority)), h('td', {}, w.reason || '-'),
    h('td', {}, fmtTime(w.createdAt)), h('td', {}, fmtTime(w.admittedAt))));
  const prevAfter = back.length ? back[back.length - 1] : null;
  const pager = h('div', { class: 'pager' },
    prevAfter !== null ? h('a', { href: link(['workloads'], { ...keep, after: prevAfter, back: back.slice(0, -1).join(',') }) }, '← previous') : '',
    data.next ? h('a', { href: link(['workloads'], { ...keep, after: data.next, back: [...back, after].join(',') }) }, 'next →') : '');
  return [h('h1', {}, 'Workloads', at ? h('span', { class: 'muted small' }, ' as of ' + at) : ''),
    filterForm([['status', 'Status', ['pending', 'admitted', 'finished', 'inactive']], ['ns', 'Namespace'], ['cq', 'ClusterQueue']], params, ['workloads']),
    h('table', {}, h('thead', {}, h('tr', {}, ['Workload', 'Status', 'LocalQueue', 'ClusterQueue', 'Priority', 'Reason', 'Created', 'Admitted'].map((t) => h('th', {}, t)))),
      h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { colspan: 8, class: 'muted' }, 'No workload.')))), pager];
}

// ---- one workload: timeline and explain

function shortType(t) { return String(t).replace(/^io\.jetqueue\.(workload\.)?/, '').replace(/\.v\d+$/, ''); }

function timeline(evs) {
  if (!evs.length) return h('p', { class: 'muted' }, 'No event.');
  const times = evs.map((e) => Date.parse(e.time));
  const t0 = Math.min(...times), t1 = Math.max(...times), span = Math.max(t1 - t0, 1);
  const W = 1000, x = (t) => 20 + ((t - t0) / span) * (W - 40);
  const marks = evs.map((e, i) => s('g', {},
    s('circle', { cx: x(times[i]), cy: 30, r: 6, class: 'mark', fill: /evicted|preempt/i.test(e.type) ? '#dc2626' : /quotareserved/i.test(e.type) ? '#16a34a' : '#2563eb' },
      s('title', {}, shortType(e.type) + ' ' + fmtTime(e.time))),
    s('text', { x: x(times[i]), y: 55 - (i % 2) * 40 + (i % 2 ? 0 : 8), 'text-anchor': 'middle', 'font-size': 11 }, shortType(e.type))));
  return s('svg', { viewBox: `0 0 ${W} 70`, preserveAspectRatio: 'none', role: 'img', 'aria-label': 'timeline' },
    s('line', { x1: 20, x2: W - 20, y1: 30, y2: 30, stroke: '#94a3b8' }), marks);
}

// The view renders from the workload and its explanation, then fills in
// its ETA and the changes that would admit it, which the server finds by
// simulating (longer on a large backlog), from a second request.
async function workloadView(ns, name) {
  const at = atParam();
  const path = `/v1/workloads/${encodeURIComponent(ns)}/${encodeURIComponent(name)}`;
  const [w, ex] = await Promise.all([api.get(path), api.get(path + '/explain', { at })]);
  const evs = (w.events || []).filter((e) => !at || Date.parse(e.time) <= Date.parse(at));
  const d = ex.detail;
  const found = h('div', { 'data-testid': 'explain-search' });
  if (ex.status === 'pending') {
    replace(found, h('div', { class: 'muted' }, 'Estimating its ETA and searching for the changes that would admit it…'));
    api.get(path + '/explain', { counterfactual: 'true', at }).then((full) => {
      replace(found, searchResult(full));
    }).catch((e) => {
      replace(found, h('div', { class: 'muted' }, 'The search failed: ' + e.message));
    });
  }
  return [h('h1', {}, ns + '/' + name, ' ', h('span', { class: 'tag ' + ex.status, 'data-testid': 'status' }, ex.status),
    at ? h('span', { class: 'muted small' }, ' as of ' + at) : ''),
  h('div', { class: 'card' },
    h('div', {}, `LocalQueue ${w.localQueue || '-'} · ClusterQueue ${ex.clusterQueue || '-'} · priority ${ex.priority} · created ${fmtTime(ex.createdAt)}`),
    ex.admittedAt ? h('div', {}, 'Admitted ' + fmtTime(ex.admittedAt)) : ''),
  h('h2', {}, 'Explain'),
  h('div', { class: 'card', 'data-testid': 'explain' },
    d ? [h('div', {}, h('b', {}, 'Reason: '), d.reason), d.message ? h('div', {}, h('b', {}, 'Message: '), d.message) : '',
      d.resource ? h('div', {}, h('b', {}, 'Blocked: '), `${d.resource} on flavor ${d.flavor} (podSet ${d.podSet})${d.cohort ? ' in cohort ' + d.cohort : ''}`) : '']
      : ex.reason ? h('div', {}, h('b', {}, 'Reason: '), ex.reason) : '',
    ex.status === 'pending' ? h('div', {}, h('b', {}, 'Ahead: '), `${ex.aheadCount || 0} workload(s)`, (ex.ahead || []).length ? ': ' + ex.ahead.join(', ') : '') : '',
    found),
  h('h2', {}, 'Timeline'),
  h('div', { class: 'card timeline', 'data-testid': 'timeline' }, timeline(evs),
    h('table', {}, h('tbody', {}, evs.map((e) => h('tr', {}, h('td', {}, String(e.seq)), h('td', {}, fmtTime(e.time)), h('td', {}, shortType(e.type)))))))];
}

// searchResult renders an explanation's ETA and counterfactual changes.
function searchResult(ex) {
  const cf = ex.counterfactuals;
  return [
    ex.eta ? h('div', { 'data-testid': 'explain-eta' }, h('b', {}, 'ETA: '), etaText(ex.eta), h('div', { class: 'small muted' }, ex.eta.assumption)) : null,
    cf && cf.outcome === 'Searched' ? [h('div', {}, h('b', {}, 'Changes that would admit it now (each verified by the scheduler):')),
      cf.changes.length ? h('ul', { class: 'changes', 'data-testid': 'counterfactuals' }, cf.changes.map((c) => h('li', {}, c.message,
        (c.displaces || []).length ? h('span', { class: 'muted small' }, ' · displaces ' + c.displaces.map((v) => v.hidden ? 'another workload' : v.namespace + '/' + v.name).join(', ')) : '')))
        : h('div', { class: 'muted' }, 'none found')] : null,
    cf && cf.outcome === 'AdmittedWithoutChange' ? h('div', {}, 'Would be admitted now without any change (a decision is on its way).') : null];
}

// ---- what-if as charts

function groupedBars(title, rows, unit) {
  // rows: [{label, old, new}]
  const W = 460, rowH = 34, H = rows.length * rowH + 30, left = 130;
  const max = Math.max(1, ...rows.flatMap((r) => [r.old, r.new]));
  const x = (v) => ((W - left - 60) * v) / max;
  const g = rows.map((r, i) => s('g', { transform: `translate(0,${i * rowH + 20})` },
    s('text', { x: left - 6, y: 14, 'text-anchor': 'end', 'font-size': 12 }, r.label),
    s('rect', { x: left, y: 2, width: x(r.old), height: 12, fill: '#94a3b8' }, s('title', {}, `before: ${r.old}${unit}`)),
    s('rect', { x: left, y: 16, width: x(r.new), height: 12, fill: '#2563eb' }, s('title', {}, `with the change: ${r.new}${unit}`)),
    s('text', { x: left + x(r.old) + 4, y: 12, 'font-size': 10 }, r.old + unit),
    s('text', { x: left + x(r.new) + 4, y: 26, 'font-size': 10 }, r.new + unit)));
  return h('div', { class: 'chart', 'data-testid': 'whatif-chart' }, h('div', {}, h('b', {}, title)),
    s('svg', { width: W, height: H, viewBox: `0 0 ${W} ${H}` }, g));
}

const defaultWhatIf = '# The changed configuration: objects as for jqctl apply.\n';

async function whatifView() {
  const out = h('div', {});
  const text = h('textarea', { name: 'config', spellcheck: 'false', 'data-testid': 'whatif-config' });
  text.value = sessionStorage.getItem('jetqueue.whatif') || defaultWhatIf;
  const since = h('input', { name: 'since', value: '24h', size: 8 });
  const form = h('form', { class: 'card', onsubmit: async (ev) => {
    ev.preventDefault();
    sessionStorage.setItem('jetqueue.whatif', text.value);
    replace(out, h('p', { class: 'muted' }, 'Replaying…'));
    try {
      const rep = await api.call('POST', '/v1/whatif', { since: since.value.trim() }, text.value, 'application/yaml');
      replace(out, whatifResult(rep));
      showError(null);
    } catch (err) { replace(out); showError(err); }
  } }, h('label', {}, 'Changed configuration (YAML)', text),
  h('div', { class: 'filters' }, h('label', {}, 'Since', since), h('button', { type: 'submit' }, 'Replay')));
  return [h('h1', {}, 'What if'), h('p', { class: 'muted' }, 'Replays the recorded history of the window through the scheduler with the changed configuration.'), form, out];
}

function whatifResult(rep) {
  const qs = rep.clusterQueues || [];
  const row = (f) => qs.map((q) => ({ label: q.clusterQueue, old: f(q.old), new: f(q.new) }));
  return [h('p', {}, `Replayed ${fmtTime(rep.from)} to ${fmtTime(rep.to)}: ${rep.arrivals} arrivals, ${rep.steps} steps.`),
    h('p', { class: 'legend small' }, h('span', {}, h('i', { style: 'background:var(--old)' }), 'as recorded'),
      h('span', {}, h('i', { style: 'background:var(--new)' }), 'with the change')),
    h('div', { class: 'charts' },
      groupedBars('Admitted', row((s) => s.admitted), ''),
      groupedBars('Mean wait', row((s) => s.meanWaitSeconds), 's'),
      groupedBars('p95 wait', row((s) => s.p95WaitSeconds), 's'),
      groupedBars('Preemptions', row((s) => s.preemptions), '')),
    h('h2', {}, 'Workloads whose first admission moved most'),
    (rep.moved || []).length ? h('table', {}, h('thead', {}, h('tr', {}, ['Workload', 'ClusterQueue', 'Recorded', 'With the change', 'Moved'].map((t) => h('th', {}, t)))),
      h('tbody', {}, rep.moved.map((m) => h('tr', {}, h('td', {}, m.hidden ? 'another workload' : m.namespace + '/' + m.name), h('td', {}, m.clusterQueue),
        h('td', {}, fmtTime(m.old)), h('td', {}, fmtTime(m.new)), h('td', {}, m.deltaSeconds !== undefined ? fmtDuration(m.deltaSeconds) : 'never admitted on one side')))))
      : h('p', { class: 'muted' }, 'No workload\'s first admission moved.')];
}

// ---- rendering and live updates

let rendering = 0;

async function render() {
  const n = ++rendering;
  const { parts, params } = route();
  const view = parts[0] || 'queues';
  for (const a of document.querySelectorAll('[data-nav]')) a.classList.toggle('active', a.dataset.nav === view);
  document.getElementById('at').value = atParam();
  try {
    let content;
    switch (view) {
      case 'pending': content = await pendingView(params); break;
      case 'workloads': content = await workloadsView(params); break;
      case 'workload': content = await workloadView(parts[1] || '', parts[2] || ''); break;
      case 'whatif': content = await whatifView(); break;
      default: content = await queuesView();
    }
    if (n !== rendering) return;
    replace(main, content);
    main.dataset.ready = String(n);
    showError(null);
  } catch (err) {
    if (n !== rendering) return;
    replace(main);
    main.dataset.ready = String(n);
    showError(err);
  }
}

let dirty = null;
function changed() {
  // Live updates refresh the view at most once a second; a view of the
  // past (?at=) and the what-if form stay as they are.
  if (atParam() || route().parts[0] === 'whatif' || dirty) return;
  dirty = setTimeout(() => { dirty = null; render(); }, 1000);
}

const live = document.getElementById('live');
let stopWatch = null;
function startWatch() {
  if (stopWatch) stopWatch();
  stopWatch = api.watch(() => changed(), (on) => {
    live.classList.toggle('on', on); live.classList.toggle('off', !on);
    live.textContent = on ? 'live' : 'offline';
  });
}

document.getElementById('at-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  setAt(document.getElementById('at').value.trim());
});
document.getElementById('at-now').addEventListener('click', () => setAt(''));
document.getElementById('token-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const el = document.getElementById('token');
  api.setToken(el.value.trim());
  el.value = '';
  startWatch();
  render();
});
window.addEventListener('hashchange', render);
window.addEventListener('popstate', render);
startWatch();
render();
