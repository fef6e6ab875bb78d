// The report page: everything it shows comes from the JSON in #ors-data (figures computed by
// `ors report`) and, for a trajectory, from its gzip chunk, decompressed when it is opened.
// Text from trajectories only ever goes into the page as text (textContent), never as HTML.
(() => {
  'use strict';
  const D = JSON.parse(document.getElementById('ors-data').textContent);
  const PAGE = 100;

  // --- small helpers -------------------------------------------------------------------------
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : v);
    }
    for (const k of kids.flat()) {
      if (k === null || k === undefined || k === false) continue;
      e.append(k instanceof Node ? k : document.createTextNode(String(k)));
    }
    return e;
  }
  const SVG = 'http://www.w3.org/2000/svg';
  function svg(tag, attrs, ...kids) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'text') e.textContent = v; else e.setAttribute(k, v);
    }
    for (const k of kids.flat()) if (k) e.append(k);
    return e;
  }
  const fix = (x, d = 4) => (x === null || x === undefined || !isFinite(x)) ? '–' : Number(x).toFixed(d);
  const pct = (x) => (x === null || x === undefined) ? '–' : (100 * x).toFixed(1) + '%';
  const int = (x) => Number(x).toLocaleString('en-US');
  const ms = (x) => x >= 10000 ? (x / 1000).toFixed(1) + ' s' : x >= 1000 ? (x / 1000).toFixed(2) + ' s' : x.toFixed(1) + ' ms';
  const signed = (x, p) => (x >= 0 ? '+' : '−') + (p ? (100 * Math.abs(x)).toFixed(1) + ' pp' : Math.abs(x).toFixed(4));
  function ci(est, p) {
    const f = p ? pct : fix;
    return est.interval ? `95% CI ${f(est.interval.lo)} to ${f(est.interval.hi)}` : '';
  }
  const mean = (a) => a.length ? a.reduce((s, x) => s + x, 0) / a.length : 0;
  // Not Math.min(...a): a spread of 100,000 values can exceed the engine's argument limit.
  const minOf = (a) => a.reduce((m, x) => x < m ? x : m, Infinity);
  const maxOf = (a) => a.reduce((m, x) => x > m ? x : m, -Infinity);

  // Task rows: [key, split, index, label, samples, mean, std, successes, errors, first episode].
  const T = { key: 0, split: 1, index: 2, label: 3, samples: 4, mean: 5, std: 6, succ: 7, err: 8, first: 9 };
  for (const run of D.runs) {
    run.byKey = new Map(run.tasks.map((t, i) => [t[T.key], i]));
    run.cache = new Map();
  }
  const verdict = (t) => t[T.succ] === 0 ? 'failed' : t[T.succ] === t[T.samples] ? 'passed' : 'mixed';

  // --- views ----------------------------------------------------------------------------------
  const tabs = [...document.querySelectorAll('#tabs button')];
  let current = 'summary', before = 'tasks';
  function show(view) {
    if (view === 'episode' && current !== 'episode') before = current;
    current = view;
    for (const b of tabs) b.setAttribute('aria-selected', String(b.dataset.view === view));
    for (const s of document.querySelectorAll('main > section[data-view]')) s.hidden = s.dataset.view !== view;
  }
  for (const b of tabs) b.addEventListener('click', () => show(b.dataset.view));
  if (D.runs.length > 1) document.querySelector('#tabs [data-view="compare"]').hidden = false;

  document.getElementById('runs').textContent = D.runs.map((r) =>
    `${r.name}: ${r.envs.join(', ')}${r.models.length ? ' · ' + r.models.join(', ') : ''} · ${int(r.stats.episodes)} episodes (${r.path})`
  ).join('   |   ');

  // --- summary --------------------------------------------------------------------------------
  function summary() {
    const root = document.getElementById('view-summary');
    const rows = [
      ['episodes', (r) => int(r.stats.episodes)],
      ['tasks × samples', (r) => `${int(r.stats.tasks)} × ${r.stats.samples === r.stats.max_samples ? r.stats.samples : r.stats.samples + '–' + r.stats.max_samples}`],
      ['mean reward', (r) => [el('b', { text: fix(r.stats.mean_reward.value) }), ' ', el('span', { class: 'muted', text: ci(r.stats.mean_reward, false) + (r.stats.max_samples > 1 ? ` · mean@${r.stats.samples}` : '') })]],
      ['success rate', (r) => [el('b', { text: pct(r.stats.success_rate.value) }), ' ', el('span', { class: 'muted', text: ci(r.stats.success_rate, true) })]],
    ];
    const ks = [...new Set(D.runs.flatMap((r) => r.stats.pass_at.map((p) => p.k)))].sort((a, b) => a - b);
    for (const k of ks) rows.push([`pass@${k}`, (r) => { const p = r.stats.pass_at.find((x) => x.k === k); return p ? pct(p.value) : '–'; }]);
    rows.push(
      ['reward std within a task', (r) => r.stats.max_samples > 1 ? fix(r.stats.task_std) : '– (one sample per task)'],
      ['errors', (r) => errorsText(r)],
      ['stop reasons', (r) => countsText(r, 'stop', r.stops)],
      ['mean steps', (r) => fix(mean(r.episodes.steps), 2)],
      ['tokens in / out', (r) => `${int(sum(r.episodes.tokens_in))} / ${int(sum(r.episodes.tokens_out))}`],
      ['time in env / model', (r) => `${ms(sum(r.episodes.env_ms))} / ${ms(sum(r.episodes.model_ms))}`],
    );
    const head = el('tr', {}, el('th', { text: '' }), D.runs.map((r) => el('th', { text: r.name })));
    const body = rows.map(([name, f]) => el('tr', {}, el('td', { text: name }), D.runs.map((r) => el('td', {}, f(r)))));
    // The figures, and beside them (below on a narrow screen) each run's distributions.
    const top = el('div', { class: 'overview' }, el('table', { class: 'grid metrics', id: 'metrics' }, el('thead', {}, head), el('tbody', {}, body)));
    root.append(top);
    for (const r of D.runs) {
      const e = r.episodes;
      const box = el('div', { class: 'plots', 'data-run': r.name });
      box.append(
        figure('reward per episode', histogram(e.reward, { lo: Math.min(0, minOf(e.reward)), hi: Math.max(1, maxOf(e.reward)) })),
        figure('success by split', splitBars(r)),
        figure('steps per episode', histogram(e.steps, { integer: true })),
        figure('tokens per episode (in + out)', histogram(e.tokens_in.map((x, i) => x + e.tokens_out[i]), {})),
        figure('time per episode: env and model', histogram2(e.env_ms, e.model_ms, ['env', 'model'])),
      );
      (D.runs.length > 1 ? root : top).append(el('div', {}, el('h2', { text: D.runs.length > 1 ? `Run ${r.name}` : 'Distributions' }), box));
    }
  }
  const sum = (a) => a.reduce((s, x) => s + x, 0);
  function errorsText(r) {
    const n = r.episodes.error.filter((x) => x !== null).length;
    return n ? `${n} (${countsText(r, 'error', r.errors)})` : '0';
  }
  function countsText(r, col, names) {
    const c = new Map();
    for (const x of r.episodes[col]) if (x !== null) c.set(x, (c.get(x) || 0) + 1);
    return [...c.entries()].sort((a, b) => b[1] - a[1]).map(([k, n]) => `${names[k]} ${n}`).join(', ');
  }
  function figure(caption, chart) { return el('figure', {}, el('figcaption', { text: caption }), chart); }

  const W = 260, H = 110, PADL = 30, PADB = 16;
  function bins(values, opt) {
    let lo = opt.lo ?? minOf(values), hi = opt.hi ?? maxOf(values);
    if (!isFinite(lo)) { lo = 0; hi = 1; }
    let n = opt.integer ? Math.min(30, Math.max(1, hi - lo + 1)) : 20;
    if (hi === lo) { hi = lo + 1; n = opt.integer ? 1 : n; }
    const w = opt.integer ? Math.max(1, Math.ceil((hi - lo + 1) / n)) : (hi - lo) / n;
    if (opt.integer) n = Math.ceil((hi - lo + 1) / w);
    return { lo, hi, n, w, integer: !!opt.integer };
  }
  function binOf(b, x) { return Math.min(b.n - 1, Math.max(0, Math.floor((x - b.lo) / b.w))); }
  function axes(g, b, maxCount) {
    const label = (x) => b.integer ? String(x) : Math.abs(x) >= 1000 ? (x / 1000).toFixed(1) + 'k' : Number(x.toPrecision(3)).toString();
    g.append(
      svg('line', { x1: PADL, y1: H - PADB, x2: W, y2: H - PADB, stroke: 'currentColor', 'stroke-opacity': 0.3 }),
      svg('text', { x: PADL, y: H - 3, text: label(b.lo) }),
      svg('text', { x: W, y: H - 3, 'text-anchor': 'end', text: label(b.integer ? b.lo + b.n * b.w - 1 : b.hi) }),
      svg('text', { x: PADL - 4, y: 10, 'text-anchor': 'end', text: int(maxCount) }),
      svg('text', { x: PADL - 4, y: H - PADB, 'text-anchor': 'end', text: '0' }),
    );
  }
  function histogram(values, opt) {
    const g = svg('svg', { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img' });
    if (!values.length) return g;
    const b = bins(values, opt);
    const counts = new Array(b.n).fill(0);
    for (const x of values) counts[binOf(b, x)]++;
    const max = maxOf(counts), bw = (W - PADL) / b.n;
    counts.forEach((c, i) => {
      const h = max ? (H - PADB - 4) * c / max : 0;
      const from = b.lo + i * b.w;
      g.append(svg('rect', { class: 'bar', x: PADL + i * bw + 0.5, y: H - PADB - h, width: Math.max(1, bw - 1), height: h },
        svg('title', { text: `${b.integer ? from + (b.w > 1 ? '–' + (from + b.w - 1) : '') : fix(from, 3) + ' to ' + fix(from + b.w, 3)}: ${c}` })));
    });
    axes(g, b, max);
    return g;
  }
  function histogram2(xs, ys, names) {
    const all = xs.concat(ys);
    const g = svg('svg', { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img' });
    if (!all.length) return g;
    const b = bins(all, { lo: 0 });
    const cx = new Array(b.n).fill(0), cy = new Array(b.n).fill(0);
    for (const x of xs) cx[binOf(b, x)]++;
    for (const y of ys) cy[binOf(b, y)]++;
    const max = Math.max(maxOf(cx), maxOf(cy)), bw = (W - PADL) / b.n;
    [[cx, 'env', 0], [cy, 'model', 1]].forEach(([c, cls, k]) => c.forEach((n, i) => {
      const h = max ? (H - PADB - 4) * n / max : 0;
      g.append(svg('rect', { class: 'bar ' + cls, x: PADL + i * bw + k * bw / 2 + 0.5, y: H - PADB - h, width: Math.max(1, bw / 2 - 1), height: h },
        svg('title', { text: `${names[k]} ${ms(b.lo + i * b.w)} to ${ms(b.lo + (i + 1) * b.w)}: ${n}` })));
    }));
    axes(g, { ...b, integer: false }, max);
    const legend = el('div', { class: 'legend muted' }, 'ms ·', el('i', { class: 'env' }), `env, mean ${ms(mean(xs))}`,
      el('i', { class: 'model' }), `${names[1]}, mean ${ms(mean(ys))}`);
    return [g, legend];
  }
  function splitBars(r) {
    const splits = Object.entries(r.stats.splits);
    const rowH = 18, h = Math.max(1, splits.length) * rowH + 4;
    const g = svg('svg', { width: W, height: h, viewBox: `0 0 ${W} ${h}`, role: 'img' });
    // Room for the longest name (about 6 px a character at this size), at most half the width.
    const x0 = Math.min(W / 2, 10 + 6 * Math.max(0, ...splits.map(([n]) => n.length)));
    splits.forEach(([name, s], i) => {
      const y = i * rowH + 2, w = (W - x0 - 70) * s.success_rate;
      g.append(
        svg('text', { x: x0 - 4, y: y + 12, 'text-anchor': 'end', text: name }),
        svg('rect', { x: x0, y: y + 2, width: W - x0 - 70, height: rowH - 6, fill: 'currentColor', 'fill-opacity': 0.08 }),
        svg('rect', { class: 'bar good', x: x0, y: y + 2, width: Math.max(0, w), height: rowH - 6 }),
        svg('text', { x: W - 66, y: y + 12, text: `${pct(s.success_rate)} of ${s.tasks}` }),
      );
    });
    return g;
  }

  // --- task table -----------------------------------------------------------------------------
  const runSel = document.getElementById('run'), filterSel = document.getElementById('filter');
  const stopSel = document.getElementById('stop'), search = document.getElementById('search');
  const state = { run: 0, sort: 'task', dir: 1, page: 0 };
  const COLS = [
    ['task', 'task', (r, t) => t[T.key], null],
    ['text', 'label', (r, t) => t[T.label], null],
    ['samples', 'num', (r, t) => t[T.samples], null],
    ['mean reward', 'num mean', (r, t) => t[T.mean], (v) => fix(v)],
    ['std', 'num std', (r, t) => t[T.std], (v) => fix(v)],
    ['success', 'num success', (r, t) => t[T.succ] / t[T.samples], (v, r, t) => `${t[T.succ]}/${t[T.samples]}`],
    ['errors', 'num errors', (r, t) => t[T.err], null],
    ['steps', 'num', (r, t) => taskMean(r, t, 'steps'), (v) => fix(v, 1)],
    ['tokens', 'num', (r, t) => taskMean(r, t, 'tokens_in') + taskMean(r, t, 'tokens_out'), (v) => int(Math.round(v))],
    ['time', 'num', (r, t) => taskMean(r, t, 'wall_ms'), (v) => ms(v)],
    ['stop reasons', 'stops', (r, t) => stopsOf(r, t).join(', '), null],
  ];
  function taskMean(r, t, col) {
    let s = 0;
    for (let i = t[T.first]; i < t[T.first] + t[T.samples]; i++) s += r.episodes[col][i];
    return s / t[T.samples];
  }
  function stopsOf(r, t) {
    const seen = new Set();
    for (let i = t[T.first]; i < t[T.first] + t[T.samples]; i++) seen.add(r.stops[r.episodes.stop[i]]);
    return [...seen];
  }
  function initTasks() {
    D.runs.forEach((r, i) => runSel.append(el('option', { value: i, text: r.name })));
    document.getElementById('run-pick').hidden = D.runs.length < 2;
    const stops = [...new Set(D.runs.flatMap((r) => r.stops))].sort();
    for (const s of stops) stopSel.append(el('option', { value: s, text: s }));
    const tr = document.querySelector('#tasks thead tr');
    for (const [name, cls] of COLS) {
      const th = el('th', { class: cls.startsWith('num') ? 'num' : '', 'data-col': name, text: name });
      th.addEventListener('click', () => {
        state.dir = state.sort === name ? -state.dir : (cls.startsWith('num') ? -1 : 1);
        state.sort = name; state.page = 0; drawTasks();
      });
      tr.append(th);
    }
    runSel.addEventListener('change', () => { state.run = Number(runSel.value); state.page = 0; drawTasks(); });
    for (const c of [filterSel, stopSel]) c.addEventListener('change', () => { state.page = 0; drawTasks(); });
    search.addEventListener('input', () => { state.page = 0; drawTasks(); });
    document.getElementById('prev').addEventListener('click', () => { state.page--; drawTasks(); });
    document.getElementById('next').addEventListener('click', () => { state.page++; drawTasks(); });
  }
  function visibleTasks() {
    const r = D.runs[state.run], f = filterSel.value, stop = stopSel.value, q = search.value.trim().toLowerCase();
    let rows = [];
    for (let i = 0; i < r.tasks.length; i++) {
      const t = r.tasks[i];
      if (f === 'failed' && t[T.succ] !== 0) continue;
      if (f === 'unpassed' && t[T.succ] === t[T.samples]) continue;
      if (f === 'mixed' && verdict(t) !== 'mixed') continue;
      if (f === 'errored' && t[T.err] === 0) continue;
      if (stop && !stopsOf(r, t).includes(stop)) continue;
      if (q && !(t[T.label].toLowerCase().includes(q) || t[T.key].toLowerCase().includes(q))) continue;
      rows.push(i);
    }
    if (state.sort !== 'task') {
      const [, , get] = COLS.find((c) => c[0] === state.sort);
      const v = new Map(rows.map((i) => [i, get(r, r.tasks[i])]));
      rows.sort((a, b) => { const x = v.get(a), y = v.get(b); return (x < y ? -1 : x > y ? 1 : a - b) * state.dir; });
    } else if (state.dir < 0) rows.reverse();
    return rows;
  }
  function drawTasks() {
    const r = D.runs[state.run], rows = visibleTasks();
    const pages = Math.max(1, Math.ceil(rows.length / PAGE));
    state.page = Math.min(Math.max(0, state.page), pages - 1);
    const from = state.page * PAGE, shown = rows.slice(from, from + PAGE);
    const body = document.querySelector('#tasks tbody');
    body.replaceChildren(...shown.map((i) => {
      const t = r.tasks[i];
      const tr = el('tr', { 'data-task': t[T.key] });
      for (const [name, cls, get, show] of COLS) {
        const v = get(r, t);
        const td = el('td', { class: cls, text: show ? show(v, r, t) : v });
        if (name === 'task' || name === 'success') td.classList.add(verdict(t));
        if (name === 'errors' && v > 0) td.classList.add('errored');
        if (name === 'text') td.title = t[T.label];
        tr.append(td);
      }
      tr.addEventListener('click', () => openTask(t[T.key], state.run));
      return tr;
    }));
    for (const th of document.querySelectorAll('#tasks th')) {
      th.setAttribute('aria-sort', th.dataset.col === state.sort ? (state.dir > 0 ? 'ascending' : 'descending') : 'none');
    }
    document.getElementById('count').textContent = `${int(rows.length)} of ${int(r.tasks.length)} tasks`;
    document.getElementById('page').textContent = rows.length ? `${int(from + 1)}–${int(from + shown.length)} of ${int(rows.length)}` : 'no task matches';
    document.getElementById('prev').disabled = state.page === 0;
    document.getElementById('next').disabled = state.page >= pages - 1;
  }

  // --- trajectories ---------------------------------------------------------------------------
  async function chunk(runIndex, c) {
    const run = D.runs[runIndex];
    if (!run.cache.has(c)) {
      const text = document.getElementById(`t${runIndex}-${c}`).textContent;
      const bytes = Uint8Array.from(atob(text.trim()), (ch) => ch.charCodeAt(0));
      const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
      run.cache.set(c, new Response(stream).json());
    }
    return run.cache.get(c);
  }
  async function episode(runIndex, e) {
    const r = D.runs[runIndex];
    return (await chunk(runIndex, r.episodes.chunk[e]))[r.episodes.pos[e]];
  }
  const viewer = document.getElementById('viewer');
  // Open task `key` in the trajectory view: a tab per sample of each run that has it, the first
  // of `preferRun`'s shown.
  function openTask(key, preferRun) {
    const tabsList = [];
    D.runs.forEach((r, ri) => {
      const ti = r.byKey.get(key);
      if (ti === undefined) return;
      const t = r.tasks[ti];
      for (let e = t[T.first]; e < t[T.first] + t[T.samples]; e++) tabsList.push({ ri, e });
    });
    document.querySelectorAll('#tasks tbody tr.open').forEach((tr) => tr.classList.remove('open'));
    document.querySelectorAll(`#tasks tbody tr`).forEach((tr) => { if (tr.dataset.task === key) tr.classList.add('open'); });
    const bar = el('div', { class: 'tabs', role: 'tablist' });
    const content = el('div', { id: 'episode' });
    document.querySelector('#tabs [data-view="episode"]').hidden = false;
    show('episode');
    const back = el('button', { class: 'back', text: `‹ Back to ${before === 'compare' ? 'the comparison' : 'the tasks'}`, onclick: () => show(before) });
    viewer.replaceChildren(back, el('h2', { text: `Task ${key}` }), bar, content);
    viewer.dataset.task = key;
    tabsList.forEach(({ ri, e }) => {
      const r = D.runs[ri], ok = r.episodes.success[e] === 1, err = r.episodes.error[e] !== null;
      const label = `${D.runs.length > 1 ? r.name + ' · ' : ''}sample ${r.episodes.sample[e]} ${err ? '⚠' : ok ? '✓' : '✗'} ${fix(r.episodes.reward[e], 2)}`;
      const b = el('button', { role: 'tab', 'data-run': ri, 'data-sample': r.episodes.sample[e], class: err ? 'errored' : ok ? 'passed' : 'failed', text: label });
      b.addEventListener('click', () => selectEpisode(bar, b, ri, e, content));
      bar.append(b);
    });
    const first = tabsList.findIndex(({ ri }) => ri === preferRun);
    const start = first < 0 ? 0 : first;
    if (tabsList.length) selectEpisode(bar, bar.children[start], tabsList[start].ri, tabsList[start].e, content);
    window.scrollTo(0, 0);
  }
  let drawing = 0;
  async function selectEpisode(bar, button, ri, e, content) {
    for (const b of bar.children) b.setAttribute('aria-selected', String(b === button));
    const ticket = ++drawing;
    content.replaceChildren(el('p', { class: 'muted', text: 'Opening the trajectory…' }));
    delete viewer.dataset.ready;
    const ep = await episode(ri, e);
    if (ticket !== drawing) return;
    content.replaceChildren(...renderEpisode(ep, D.runs[ri]));
    viewer.dataset.ready = `${ri}:${e}`;
  }

  function blocks(list) {
    return (list || []).map((b) => {
      if (b.type === 'image') {
        const mime = /^image\/(png|jpeg|gif|webp|bmp)$/.test(b.mimeType || '') ? b.mimeType : 'image/png';
        return el('img', { src: `data:${mime};base64,${b.data}`, alt: `image (${b.mimeType || 'unknown type'})` });
      }
      return el('pre', { text: b.text ?? JSON.stringify(b) });
    });
  }
  const json = (v) => el('pre', { text: JSON.stringify(v, null, 2) });
  function outcome(turn) {
    const o = turn.outcome;
    if (o.output) {
      const out = o.output;
      const facts = [`reward ${out.reward ?? '–'}`, out.finished ? 'finished' : null, `${ms(turn.latency_ms)}`].filter(Boolean).join(' · ');
      return { error: false, facts, body: [...blocks(out.blocks), out.metadata ? el('details', {}, el('summary', { text: 'metadata' }), json(out.metadata)) : null] };
    }
    const msg = o.tool_error ?? o.crashed ?? JSON.stringify(o);
    return { error: true, facts: `${o.crashed !== undefined ? 'crashed' : 'tool error'} · reward 0 · ${ms(turn.latency_ms)}`, body: [el('pre', { text: msg })] };
  }
  function toolMsg(turn, name) {
    const o = outcome(turn);
    return el('div', { class: 'msg tool' + (o.error ? ' error' : ''), 'data-tool': name },
      el('div', { class: 'who' }, `tool ${name} · step ${turn.step} · `, el('span', { class: 'reward', text: o.facts })),
      el('div', { class: 'call' }, el('pre', { text: `${name}(${JSON.stringify(turn.input)})` })), o.body);
  }
  function renderEpisode(ep, run) {
    const t = ep.timings || {};
    const facts = el('div', { class: 'facts' },
      el('span', {}, el('b', { text: 'reward ' }), fix(ep.total_reward)),
      el('span', {}, el('b', { text: 'stop ' }), ep.stop_reason),
      el('span', {}, el('b', { text: 'steps ' }), ep.steps),
      el('span', {}, el('b', { text: 'calls ' }), ep.tool_calls.length),
      el('span', {}, el('b', { text: 'time ' }), `${ms(t.wall_ms || 0)} (env ${ms(t.env_ms || 0)}, model ${ms(t.policy_ms || 0)})`),
      ep.agent ? el('span', {}, el('b', { text: 'model ' }), `${ep.agent.model} · ${int(ep.agent.usage.input_tokens)} in / ${int(ep.agent.usage.output_tokens)} out tokens`) : null,
      t.started_at_ms ? el('span', { class: 'muted', text: new Date(t.started_at_ms).toISOString() }) : null,
    );
    const out = [
      el('h3', { text: `${ep.env} · ${ep.split} · task ${ep.index} · sample ${ep.sample ?? 0} · ${run.name}` }),
      facts,
      el('details', {}, el('summary', { text: 'task' }), json(ep.task)),
    ];
    const turns = ep.tool_calls;
    const used = new Set();
    if (ep.agent) {
      const byId = new Map(turns.map((x, i) => [x.id, i]));
      const calls = new Map(ep.agent.model_calls.map((c) => [c.step, c]));
      let step = 0, userSeen = false;
      const flushStep = (s) => turns.forEach((x, i) => {
        if (x.step === s && !used.has(i)) { used.add(i); out.push(toolMsg(x, x.name)); }
      });
      for (const m of ep.agent.messages) {
        if (m.role === 'system') out.push(el('div', { class: 'msg system' }, el('div', { class: 'who', text: 'system' }), el('pre', { text: m.content })));
        else if (m.role === 'user') {
          out.push(el('div', { class: 'msg user' }, el('div', { class: 'who', text: userSeen ? 'user' : 'prompt' }), blocks(m.content)));
          userSeen = true;
        } else if (m.role === 'assistant') {
          if (step) flushStep(step);
          step++;
          const c = calls.get(step);
          const who = [`assistant · step ${step}`, c ? ms(c.latency_ms) : null, c && c.usage ? `${c.usage.input_tokens} in / ${c.usage.output_tokens} out` : null, c && c.finish_reason ? c.finish_reason : null, c && c.attempts > 1 ? `${c.attempts} attempts` : null].filter(Boolean).join(' · ');
          out.push(el('div', { class: 'msg assistant' }, el('div', { class: 'who', text: who }),
            m.content ? el('pre', { text: m.content }) : null,
            (m.tool_calls || []).map((tc) => el('div', { class: 'call' }, el('pre', { text: `→ ${tc.name}(${tc.arguments})` })))));
        } else if (m.role === 'tool') {
          const i = byId.get(m.tool_call_id);
          if (i !== undefined && !used.has(i)) { used.add(i); out.push(toolMsg(turns[i], m.name)); }
          else out.push(el('div', { class: 'msg tool' + (m.is_error ? ' error' : ''), 'data-tool': m.name }, el('div', { class: 'who', text: `tool ${m.name} · not made${m.is_error ? ' (error)' : ''}` }), blocks(m.content)));
        }
      }
      flushStep(step);
    }
    turns.forEach((x, i) => { if (!used.has(i)) out.push(toolMsg(x, x.name)); });
    if (ep.error) {
      out.push(el('div', { class: 'msg error', id: 'episode-error' }, el('div', { class: 'who', text: `error · ${ep.error.kind}${ep.error.status ? ' · HTTP ' + ep.error.status : ''}` }), el('pre', { text: ep.error.message })));
    }
    out.push(el('div', { class: 'msg end' }, el('div', { class: 'who', text: 'end' }), `stopped: ${ep.stop_reason}${ep.finished ? ' (finished)' : ''} · total reward ${fix(ep.total_reward)}`));
    return out;
  }

  // --- comparison -----------------------------------------------------------------------------
  function compare() {
    const root = document.getElementById('view-compare');
    for (const c of D.comparisons) {
      const a = D.runs[c.a], b = D.runs[c.b];
      root.append(el('h2', { text: `${b.name} vs ${a.name} (baseline)` }));
      if (!c.shared) { root.append(el('p', { text: 'No tasks in common.' })); continue; }
      const diff = (d, p) => el('span', { class: significant(d) ? 'sig' : '' }, signed(d.mean, p), ' ',
        el('span', { class: 'muted', text: d.interval ? `(95% CI ${signed(d.interval.lo, p)} to ${signed(d.interval.hi, p)})` : '' }));
      root.append(el('div', { class: 'cards' },
        card('shared tasks', int(c.shared), ''),
        card('Δ mean reward', diff(c.reward, false), 'paired bootstrap over tasks'),
        card('Δ success rate', diff(c.success, true), 'paired bootstrap over tasks'),
        card('tasks better / worse', `${int(c.better)} / ${int(c.worse)}`, `${int(c.shared - c.better - c.worse)} unchanged`),
      ));
      const deltas = [];
      for (const [ti, t] of b.tasks.entries()) {
        const ai = a.byKey.get(t[T.key]);
        if (ai !== undefined) deltas.push([t[T.key], a.tasks[ai][T.mean], t[T.mean], ti]);
      }
      root.append(el('div', { class: 'plots' }, figure(`per-task Δ mean reward (${b.name} − ${a.name})`, histogram(deltas.map((d) => d[2] - d[1]), {}))));
      for (const [what, list, cls] of [[`Fixed: failed every sample in ${a.name}, passed every sample in ${b.name}`, c.fixed, 'fixed'], [`Broken: passed every sample in ${a.name}, failed every sample in ${b.name}`, c.broken, 'broken']]) {
        root.append(el('h3', { text: `${what} (${list.length})` }));
        root.append(el('ul', { class: 'flips ' + cls }, list.map((key) => el('li', {}, el('button', { class: 'link', 'data-task': key, text: key, onclick: () => openTask(key, c.b) }),
          ' ', el('span', { class: 'muted', text: (b.tasks[b.byKey.get(key)] || [])[T.label] || '' })))));
      }
      const changed = deltas.filter((d) => Math.abs(d[2] - d[1]) > 1e-9).sort((x, y) => Math.abs(y[2] - y[1]) - Math.abs(x[2] - x[1]));
      root.append(el('h3', { text: `Tasks whose mean reward changed (${changed.length}${changed.length > 200 ? ', the 200 largest' : ''})` }));
      root.append(el('table', { class: 'grid changed' },
        el('thead', {}, el('tr', {}, el('th', { text: 'task' }), el('th', { class: 'num', text: a.name }), el('th', { class: 'num', text: b.name }), el('th', { class: 'num', text: 'Δ' }))),
        el('tbody', {}, changed.slice(0, 200).map(([key, x, y]) => el('tr', { 'data-task': key, onclick: () => openTask(key, c.b) },
          el('td', {}, el('button', { class: 'link', text: key })), el('td', { class: 'num', text: fix(x) }), el('td', { class: 'num', text: fix(y) }), el('td', { class: 'num ' + (y > x ? 'passed' : 'failed'), text: signed(y - x, false) }))))));
    }
  }
  const significant = (d) => d.interval && (d.interval.lo > 0 || d.interval.hi < 0);
  function card(title, value, note) {
    return el('div', { class: 'card' }, el('div', { class: 'muted', text: title }), el('div', { class: 'v' }, value), el('div', { class: 'ci', text: note }));
  }

  summary();
  initTasks();
  if (D.comparisons.length) compare();
  show('summary');
  drawTasks();
  performance.mark('ors-ready');
  document.body.dataset.ready = 'true';
})();
