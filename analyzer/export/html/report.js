// cumemtrace HTML report: draws the data inlined in <script id="cumem-data"> with canvas and plain DOM. Written for
// this project; no library, nothing fetched. Must never reach the network: the page's CSP forbids it, and the
// self-check below records any attempt.
'use strict';
(function () {
  const t0 = performance.now();
  const errors = [];
  const blocked = [];
  window.addEventListener('error', (e) => errors.push(String(e.message || e)));
  window.addEventListener('securitypolicyviolation', (e) => blocked.push(e.blockedURI || 'blocked'));
  const origError = console.error;
  console.error = function (...args) { errors.push(args.join(' ')); origError.apply(console, args); };

  try {
    main();
  } catch (e) {
    const check = document.getElementById('cumem-selfcheck');
    check.dataset.status = 'error';
    check.dataset.errors = String(e && e.stack || e);
    throw e;
  }

  function main() {
  const D = JSON.parse(document.getElementById('cumem-data').textContent);
  const S = D.strings;
  const $ = (id) => document.getElementById(id);
  const el = (tag, attrs, ...kids) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'class') e.className = v; else if (k === 'text') e.textContent = v; else e.setAttribute(k, v);
    }
    for (const k of kids) e.append(k);
    return e;
  };
  const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  function bytes(b) {
    let v = Number(b), u = 0;
    while (Math.abs(v) >= 1024 && u < UNITS.length - 1) { v /= 1024; u++; }
    return u === 0 ? `${v} B` : `${v.toFixed(1)} ${UNITS[u]}`;
  }
  const secs = (ns) => `${(ns / 1e9).toFixed(3)} s`;
  const devName = (d) => (d < 0 ? 'host' : `device ${d}`);
  const PALETTE = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948', '#b07aa1', '#ff9da7',
                   '#9c755f', '#bab0ac', '#1f77b4', '#17becf'];

  function frameLabel(fi) {
    const f = D.frames[fi];
    if (!f) return '(no frame)';
    const fn = S[f[0]], file = S[f[1]], line = f[2], mod = S[f[3]];
    if (f[4] === 2) return fn;
    if (file) return line ? `${fn}  ${file}:${line}` : `${fn}  ${file}`;
    return mod ? `${fn}  [${mod}]` : fn;
  }
  function stackText(si, limit) {
    if (si < 0) return '(no stack)';
    const frames = D.stacks[si];
    const lines = [];
    for (let i = frames.length - 1; i >= 0 && lines.length < (limit || 40); i--) lines.push(frameLabel(frames[i]));
    return lines.join('\n');
  }
  function groupOf(si) {
    if (si < 0) return { key: 'none', label: '(no stack)' };
    const [g, fallback] = D.stack_groups[si];
    if (g < 0) {
      const frames = D.stacks[si];
      return { key: `s${si}`, label: frames.length ? `stack: ${frameLabel(frames[0])}` : '(no stack)' };
    }
    return { key: `f${g}`, label: frameLabel(g) + (fallback ? '  (no user frame)' : '') };
  }

  // ---- header ----
  const info = D.info;
  $('title').textContent = info.argv.length ? info.argv.join(' ') : info.path;
  const facts = [`trace ${info.path}`, `pid ${info.pid}`, info.host ? `host ${info.host}` : '',
    `${secs(info.duration_ns)}`, `${info.events.toLocaleString()} events`,
    ...D.devices.filter((d) => d.device >= 0).map((d) => `${devName(d.device)}: ${d.name} (${bytes(d.total_memory)})`),
    info.clean_end ? '' : 'no trailer: the process did not exit cleanly', `grouped by ${info.group_by}`];
  $('facts').textContent = facts.filter(Boolean).join(' · ');
  // The answer first: the same sentences the text summary opens with.
  for (const line of D.diagnosis || []) $('diagnosis').append(el('p', { text: line }));
  $('caps').textContent = 'Drawn: ' + D.caps.join('; ') + '.';

  // ---- timeline ----
  // Host memory (pinned, registered) has its own track; everything else (a GPU's kinds and total, and device
  // memory placed on the host, such as NCCL's host-located VMM handles) is a timeline to choose.
  const HOST_KINDS = ['pinned_host', 'registered_host'];
  const seriesList = D.series.filter((s) => !HOST_KINDS.includes(s.kind));
  const hostSeries = D.series.filter((s) => HOST_KINDS.includes(s.kind));
  const pick = $('series');
  seriesList.forEach((s, i) => pick.append(el('option', { value: i, text: `${devName(s.device)} ${s.kind}` })));
  let current = Math.max(0, seriesList.findIndex((s) => s.kind === 'total' && s.device >= 0));
  pick.value = current;
  const B = D.buckets, W = D.bucket_ns, DUR = Math.max(info.duration_ns, 1);
  let selection = null;  // {t0, t1}

  function setupCanvas(c, h) {
    const dpr = window.devicePixelRatio || 1;
    const w = c.parentElement.clientWidth || 900;
    c.width = w * dpr; c.height = h * dpr; c.style.width = w + 'px'; c.style.height = h + 'px';
    const ctx = c.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    return { ctx, w, h };
  }
  const PAD_L = 70, PAD_R = 10, PAD_T = 14, PAD_B = 22;
  const xOf = (t, w) => PAD_L + (t / DUR) * (w - PAD_L - PAD_R);
  const tOf = (x, w) => Math.min(DUR, Math.max(0, ((x - PAD_L) / (w - PAD_L - PAD_R)) * DUR));

  function axes(ctx, w, h, top) {
    ctx.strokeStyle = '#999'; ctx.fillStyle = '#555'; ctx.font = '11px sans-serif'; ctx.lineWidth = 1;
    ctx.beginPath(); ctx.moveTo(PAD_L, PAD_T); ctx.lineTo(PAD_L, h - PAD_B); ctx.lineTo(w - PAD_R, h - PAD_B); ctx.stroke();
    for (let i = 0; i <= 4; i++) {
      const y = h - PAD_B - (i / 4) * (h - PAD_T - PAD_B);
      ctx.fillText(bytes(Math.round((top * i) / 4)), 2, y + 4);
    }
    for (let i = 0; i <= 5; i++) ctx.fillText(secs((DUR * i) / 5), xOf((DUR * i) / 5, w) - 20, h - 6);
  }
  const drawn = { points: 0, max: {}, bands: 0 };

  function drawTimeline() {
    const s = seriesList[current];
    const c = $('chart');
    const { ctx, w, h } = setupCanvas(c, 300);
    ctx.clearRect(0, 0, w, h);
    if (!s) { ctx.fillText('No device memory in this trace.', 20, 40); return; }
    const driverPts = s.kind === 'total' ? D.driver.filter((p) => p[0] === s.device) : [];
    let top = Math.max(...s.max, 1);
    for (const p of driverPts) top = Math.max(top, p[2]);
    top *= 1.05;
    axes(ctx, w, h, top);
    // The program's phases, as bands behind the memory, named at the top.
    drawn.bands = 0;
    (D.phases || []).forEach((p, i) => {
      const x0 = xOf(p.t0, w), x1 = Math.max(xOf(p.t1, w), x0 + 1);
      ctx.fillStyle = i % 2 ? 'rgba(120,120,220,0.10)' : 'rgba(220,160,60,0.12)';
      ctx.fillRect(x0, PAD_T, x1 - x0, h - PAD_T - PAD_B);
      ctx.fillStyle = '#555';
      if (x1 - x0 > 30) ctx.fillText(p.name, x0 + 2, PAD_T + 10);
      drawn.bands++;
    });
    const yOf = (v) => h - PAD_B - (v / top) * (h - PAD_T - PAD_B);
    const bx = (i) => xOf(i * W, w);
    // Owners stacked, at each bucket's max (they add up to the max, so the peak drawn is the peak).
    const base = new Float64Array(B);
    const legend = $('legend'); legend.textContent = '';
    s.owners.forEach((vals, o) => {
      if (!vals) return;
      const color = PALETTE[o % PALETTE.length];
      ctx.fillStyle = color; ctx.globalAlpha = 0.75;
      ctx.beginPath(); ctx.moveTo(bx(0), yOf(base[0]));
      for (let i = 0; i < B; i++) { ctx.lineTo(bx(i), yOf(base[i] + vals[i])); ctx.lineTo(bx(i + 1), yOf(base[i] + vals[i])); }
      for (let i = B - 1; i >= 0; i--) { ctx.lineTo(bx(i + 1), yOf(base[i])); ctx.lineTo(bx(i), yOf(base[i])); }
      ctx.closePath(); ctx.fill(); ctx.globalAlpha = 1;
      for (let i = 0; i < B; i++) base[i] += vals[i];
      legend.append(el('span', { class: 'key', style: `background:${color}` }), el('span', { text: D.owner_names[o] + '  ' }));
    });
    // max (outline) and min (dashed)
    ctx.strokeStyle = '#222'; ctx.lineWidth = 1; ctx.beginPath();
    for (let i = 0; i < B; i++) { ctx.lineTo(bx(i), yOf(s.max[i])); ctx.lineTo(bx(i + 1), yOf(s.max[i])); }
    ctx.stroke();
    ctx.setLineDash([3, 3]); ctx.strokeStyle = '#777'; ctx.beginPath();
    for (let i = 0; i < B; i++) { ctx.lineTo(bx(i), yOf(s.min[i])); ctx.lineTo(bx(i + 1), yOf(s.min[i])); }
    ctx.stroke(); ctx.setLineDash([]);
    drawn.points += 2 * B;
    drawn.max[`${s.device}/${s.kind}`] = Math.max(...s.max);
    if (driverPts.length) {
      ctx.strokeStyle = '#c00'; ctx.lineWidth = 1.5; ctx.beginPath();
      driverPts.forEach((p, i) => (i ? ctx.lineTo(xOf(p[1], w), yOf(p[2])) : ctx.moveTo(xOf(p[1], w), yOf(p[2]))));
      ctx.stroke();
      legend.append(el('span', { class: 'key', style: 'background:#c00' }), el('span', { text: 'driver: used memory  ' }));
      drawn.points += driverPts.length;
    }
    // peak and failed allocations
    const peak = D.peaks.find((p) => p.device === s.device && p.kind === s.kind);
    if (peak) {
      const x = xOf(peak.t, w), y = yOf(peak.bytes);
      ctx.fillStyle = '#000'; ctx.beginPath(); ctx.moveTo(x, y - 2); ctx.lineTo(x - 5, y - 10); ctx.lineTo(x + 5, y - 10); ctx.fill();
      ctx.fillText(`peak ${bytes(peak.bytes)}`, Math.min(x + 6, w - 90), Math.max(y - 4, 12));
    }
    ctx.strokeStyle = '#d00'; ctx.lineWidth = 1;
    for (const o of D.ooms) {
      if (o.device !== s.device && s.device >= 0 && o.kind !== 'pinned_host') continue;
      const x = xOf(o.t, w); ctx.beginPath(); ctx.moveTo(x, PAD_T); ctx.lineTo(x, h - PAD_B); ctx.stroke();
      ctx.fillStyle = '#d00'; ctx.fillText('OOM', x + 2, h - PAD_B - 6);
    }
    if (selection) {
      ctx.fillStyle = 'rgba(0,90,200,0.15)';
      const x0 = xOf(selection.t0, w), x1 = Math.max(xOf(selection.t1, w), x0 + 2);
      ctx.fillRect(x0, PAD_T, x1 - x0, h - PAD_T - PAD_B);
    }
  }

  // PyTorch's segments at its OOM, one row each (largest first, width by size): tensors dark, blocks waiting for
  // their streams orange, free blocks (the holes, none large enough for the request) white with a red edge.
  function drawBlockMap() {
    const M = D.allocator;
    if (!M || !M.segments || !M.segments.length) return;
    $('blockmap-box').hidden = false;
    const rows = M.segments.slice(0, 60);
    const ROW = 14;
    const { ctx, w } = setupCanvas($('blockmap'), rows.length * ROW + 20);
    const largest = rows[0].size;
    let holes = 0, holeBytes = 0, biggestHole = 0;
    drawn.mapBlocks = 0;
    rows.forEach((s, r) => {
      const width = Math.max(2, (w - 20) * s.size / largest), y = 10 + r * ROW;
      for (const [offset, size, state] of s.blocks) {
        const x0 = 10 + width * offset / s.size, bw = Math.max(1, width * size / s.size);
        ctx.fillStyle = state === 0 ? '#345' : state === 1 ? '#e90' : '#fff';
        ctx.fillRect(x0, y, bw, ROW - 3);
        if (state === 2) {
          ctx.strokeStyle = '#c00'; ctx.strokeRect(x0 + 0.5, y + 0.5, Math.max(bw - 1, 0.5), ROW - 4);
          holes++; holeBytes += size; biggestHole = Math.max(biggestHole, size);
        }
        drawn.mapBlocks++;
      }
    });
    $('blockmap-head').textContent = `${devName(M.device)}, right after the failed request of ${bytes(M.request)}: ` +
      `${M.segments.length} segments; ${holes} free blocks (${bytes(holeBytes)}, the largest ${bytes(biggestHole)})` +
      (M.segments.length > rows.length ? `; the ${rows.length} largest segments drawn` : '') +
      (M.blocks_left_out ? `; ${M.blocks_left_out} blocks of smaller segments left out` : '');
  }

  function drawPinned() {
    const s = hostSeries.find((x) => x.kind === 'pinned_host');
    const c = $('pinned');
    const { ctx, w, h } = setupCanvas(c, s ? 120 : 30);
    if (!s) { ctx.fillStyle = '#555'; ctx.font = '12px sans-serif'; ctx.fillText('No pinned host memory in this trace.', 10, 18); return; }
    const top = Math.max(...s.max, 1) * 1.1;
    axes(ctx, w, h, top);
    const yOf = (v) => h - PAD_B - (v / top) * (h - PAD_T - PAD_B);
    ctx.fillStyle = 'rgba(89,161,79,0.7)'; ctx.beginPath(); ctx.moveTo(xOf(0, w), yOf(0));
    for (let i = 0; i < B; i++) { ctx.lineTo(xOf(i * W, w), yOf(s.max[i])); ctx.lineTo(xOf((i + 1) * W, w), yOf(s.max[i])); }
    ctx.lineTo(xOf(B * W, w), yOf(0)); ctx.closePath(); ctx.fill();
    drawn.points += B;
    drawn.max[`${s.device}/${s.kind}`] = Math.max(...s.max);
    ctx.fillStyle = '#000';
    const labelled = [];
    for (const sp of D.pinned.spikes.slice(0, 5)) {
      const x = xOf(sp.start, w);
      if (labelled.some((l) => Math.abs(l - x) < 90)) continue;  // the larger spike nearby keeps its label
      labelled.push(x);
      ctx.fillText(`▲ ${sp.thread || '#' + sp.thread_index}`, x, PAD_T + 8);
    }
  }

  // ---- snapshots: what was live ----
  function scopesFor(device, kind) {
    const out = [];
    D.snapshots.forEach((snap, i) => snap.scopes.forEach((sc) => {
      if (sc.device === device && sc.kind === kind) out.push({ i, snap, sc });
    }));
    return out;
  }
  function chooseSnapshot(t0, t1, device, kind) {
    const cands = scopesFor(device, kind);
    if (!cands.length) return null;
    const inside = cands.filter((c) => c.snap.t >= t0 && c.snap.t <= t1);
    if (inside.length) return inside.reduce((a, b) => (b.sc.total > a.sc.total ? b : a));
    const mid = (t0 + t1) / 2;
    return cands.reduce((a, b) => (Math.abs(b.snap.t - mid) < Math.abs(a.snap.t - mid) ? b : a));
  }
  let shown = null;
  function show(choice, why) {
    shown = choice;
    const head = $('live-head');
    if (!choice) { head.textContent = 'No snapshot of what was live for this selection.'; $('icicle').style.height = '0'; $('groups').textContent = ''; return; }
    const { snap, sc } = choice;
    const what = snap.what === 'peak' ? 'at the peak' : snap.what === 'oom' ? 'at a failed allocation' : 'at';
    head.textContent = `${why ? why + ': ' : ''}live ${what} ${secs(snap.t)} on ${devName(sc.device)} ${sc.kind}: ` +
      `${bytes(sc.total)} in ${sc.count.toLocaleString()} allocations, ${sc.stacks_in_all.toLocaleString()} stacks` +
      (sc.stacks.length < sc.stacks_in_all ? ` (largest ${sc.stacks.length} drawn, the rest as "other")` : '');
    drawIcicle(sc);
    drawGroups(sc);
  }

  let icicleNodes = [];
  function buildTree(sc, userOnly) {
    const root = { name: 'all', bytes: 0, kids: new Map(), depth: 0 };
    const add = (path, b) => {
      let n = root; n.bytes += b;
      for (const fi of path) {
        let k = n.kids.get(fi);
        if (!k) { k = { fi, bytes: 0, kids: new Map(), parent: n }; n.kids.set(fi, k); }
        k.bytes += b; n = k;
      }
    };
    for (const [si, b] of sc.stacks) {
      let path = si >= 0 ? D.stacks[si] : [];
      if (userOnly) path = path.filter((fi) => D.frames[fi][4] === 1 || D.frames[fi][5] === 1);
      add(path, b);
    }
    if (sc.other[0] > 0) add([-1], sc.other[0]);
    return root;
  }
  function drawIcicle(sc) {
    const root = buildTree(sc, $('useronly').checked);
    const c = $('icicle');
    let depth = 0;
    const walk = (n, d) => { depth = Math.max(depth, d); for (const k of n.kids.values()) walk(k, d + 1); };
    walk(root, 0);
    const ROW = 17;
    const { ctx, w } = setupCanvas(c, (depth + 1) * ROW + 4);
    icicleNodes = [];
    ctx.font = '11px sans-serif'; ctx.textBaseline = 'middle';
    const total = Math.max(root.bytes, 1);
    let drawnBoxes = 0;
    const draw = (n, x, d, width) => {
      if (width < 0.5) return;
      const y = d * ROW;
      const name = n === root ? `all: ${bytes(root.bytes)}` : n.fi === -1 ? 'other (smaller stacks)' : frameLabel(n.fi);
      const f = n.fi >= 0 && n !== root ? D.frames[n.fi] : null;
      ctx.fillStyle = !f ? '#bbb' : f[4] === 1 ? '#f6c85f' : f[5] ? '#9dd866' : f[4] === 2 ? '#ddd' : '#8fb8de';
      ctx.fillRect(x, y, width - 0.5, ROW - 1);
      if (width > 30) {
        ctx.fillStyle = '#000'; ctx.save(); ctx.beginPath(); ctx.rect(x, y, width - 1, ROW); ctx.clip();
        ctx.fillText(name, x + 3, y + ROW / 2); ctx.restore();
      }
      icicleNodes.push({ x, y, w: width, h: ROW, n, name });
      drawnBoxes++;
      let cx = x;
      const kids = [...n.kids.values()].sort((a, b) => b.bytes - a.bytes);
      for (const k of kids) { const kw = (k.bytes / n.bytes) * width; draw(k, cx, d + 1, kw); cx += kw; }
    };
    draw(root, 0, 0, w);
    icicleNodes.total = total;
    drawn.icicle = drawnBoxes;
  }
  function nodePath(n) {
    const out = [];
    for (let k = n; k && k.fi !== undefined; k = k.parent) out.push(k.fi === -1 ? 'other' : frameLabel(k.fi));
    return out.join('\n');
  }
  function drawGroups(sc) {
    const groups = new Map();
    for (const [si, b, cnt] of sc.stacks) {
      const g = groupOf(si);
      let e = groups.get(g.key);
      if (!e) { e = { label: g.label, bytes: 0, count: 0, stacks: 0, top: si, topBytes: 0 }; groups.set(g.key, e); }
      e.bytes += b; e.count += cnt; e.stacks++;
      if (b > e.topBytes) { e.topBytes = b; e.top = si; }
    }
    const rows = [...groups.values()].sort((a, b) => b.bytes - a.bytes).slice(0, 100);
    const t = el('table', {}, el('tr', {}, el('th', { text: 'bytes' }), el('th', { text: 'share' }),
      el('th', { text: 'allocations' }), el('th', { text: 'stacks' }), el('th', { text: `where (--group-by ${info.group_by})` })));
    for (const r of rows) {
      const tr = el('tr', { title: stackText(r.top) }, el('td', { class: 'num', text: bytes(r.bytes) }),
        el('td', { class: 'num', text: `${((100 * r.bytes) / Math.max(sc.total, 1)).toFixed(1)}%` }),
        el('td', { class: 'num', text: r.count.toLocaleString() }), el('td', { class: 'num', text: r.stacks }),
        el('td', { text: r.label }));
      t.append(tr);
    }
    if (sc.other[0] > 0) t.append(el('tr', {}, el('td', { class: 'num', text: bytes(sc.other[0]) }), el('td', {}), el('td', { class: 'num', text: sc.other[1].toLocaleString() }), el('td', {}), el('td', { text: 'other (smaller stacks, not kept)' })));
    $('groups').textContent = ''; $('groups').append(t);
  }

  // ---- interactions ----
  const tip = $('tip');
  function showTip(ev, text) { tip.textContent = text; tip.style.display = 'block'; tip.style.left = (ev.pageX + 12) + 'px'; tip.style.top = (ev.pageY + 12) + 'px'; }
  const hideTip = () => { tip.style.display = 'none'; };
  const chart = $('chart');
  let dragStart = null;
  chart.addEventListener('mousedown', (ev) => { dragStart = tOf(ev.offsetX, chart.clientWidth); });
  chart.addEventListener('mouseup', (ev) => {
    if (dragStart === null) return;
    let a = dragStart, b = tOf(ev.offsetX, chart.clientWidth); dragStart = null;
    if (a > b) [a, b] = [b, a];
    const s = seriesList[current]; if (!s) return;
    const scopeKind = s.kind === 'total' ? 'total' : 'total';
    selection = { t0: a, t1: b };
    show(chooseSnapshot(a, b, s.device, scopeKind), b - a > DUR / 500 ? `range ${secs(a)} to ${secs(b)}` : `near ${secs(a)}`);
    drawTimeline();
  });
  chart.addEventListener('mousemove', (ev) => {
    const s = seriesList[current]; if (!s) return;
    const t = tOf(ev.offsetX, chart.clientWidth), i = Math.min(B - 1, Math.floor(t / W));
    const owners = s.owners.map((v, o) => (v && v[i] ? `  ${D.owner_names[o]}: ${bytes(v[i])}` : null)).filter(Boolean);
    showTip(ev, `${secs(i * W)} to ${secs((i + 1) * W)}\nmax ${bytes(s.max[i])}, min ${bytes(s.min[i])}\n${owners.join('\n')}`);
  });
  chart.addEventListener('mouseleave', hideTip);
  // The pinned track: a click shows what pinned host memory was live then.
  $('pinned').addEventListener('click', (ev) => {
    const t = tOf(ev.offsetX, $('pinned').clientWidth);
    show(chooseSnapshot(t - DUR / 200, t + DUR / 200, -1, 'pinned_host'), `pinned host memory near ${secs(t)}`);
  });
  $('icicle').addEventListener('mousemove', (ev) => {
    const x = ev.offsetX, y = ev.offsetY;
    const hit = icicleNodes.find((b) => x >= b.x && x < b.x + b.w && y >= b.y && y < b.y + b.h);
    if (!hit) return hideTip();
    showTip(ev, `${bytes(hit.n.bytes)} (${((100 * hit.n.bytes) / icicleNodes.total).toFixed(1)}%)\n${hit.n.fi === undefined ? 'all' : nodePath(hit.n)}`);
  });
  $('icicle').addEventListener('mouseleave', hideTip);
  $('useronly').addEventListener('change', () => shown && show(shown, ''));
  pick.addEventListener('change', () => { current = Number(pick.value); selection = null; drawTimeline(); });

  // one-click moments: each peak and each failed allocation
  const quick = $('quick');
  D.peaks.filter((p) => p.snapshot >= 0).forEach((p) => {
    const b = el('button', { text: `peak ${devName(p.device)} ${p.kind} ${bytes(p.bytes)}` });
    b.onclick = () => {
      const i = seriesList.findIndex((s) => s.device === p.device && s.kind === p.kind);
      if (i >= 0) { current = i; pick.value = i; }
      selection = { t0: p.t, t1: p.t };
      show({ i: p.snapshot, snap: D.snapshots[p.snapshot], sc: D.snapshots[p.snapshot].scopes[0] }, 'peak');
      drawTimeline();
    };
    quick.append(b);
  });
  D.ooms.slice(0, 50).forEach((o, k) => {
    if (o.snapshot < 0) return;
    const b = el('button', { class: 'oom', text: `OOM ${k + 1}: ${bytes(o.bytes)} ${o.api} at ${secs(o.t)}` });
    b.onclick = () => { selection = { t0: o.t, t1: o.t }; show({ i: o.snapshot, snap: D.snapshots[o.snapshot], sc: D.snapshots[o.snapshot].scopes[0] }, 'failed allocation'); drawTimeline(); };
    quick.append(b);
  });

  // ---- tables ----
  function table(id, head, rows) {
    const t = el('table', {}, el('tr', {}, ...head.map((h) => el('th', { text: h }))));
    for (const r of rows) t.append(el('tr', r.title ? { title: r.title } : {}, ...r.cells.map((c) => el('td', typeof c === 'object' ? c : { text: String(c) }))));
    $(id).textContent = ''; $(id).append(rows.length ? t : el('p', { text: 'None.' }));
  }
  const num = (v) => ({ class: 'num', text: v });
  // Leaks are kept per stack; merged here by (device, kind, group) as --group-by does, largest first.
  const leakGroups = new Map();
  for (const l of D.leaks) {
    const g = groupOf(l.stack);
    const key = `${l.device}|${l.kind}|${g.key}`;
    let e = leakGroups.get(key);
    if (!e) { e = { device: l.device, kind: l.kind, label: g.label, bytes: 0, count: 0, growth: [0, 0, 0, 0], stack: l.stack, stacks: 0 }; leakGroups.set(key, e); }
    e.bytes += l.bytes; e.count += l.count; e.stacks++;
    l.growth.forEach((v, i) => { e.growth[i] += v; });
  }
  const leakRows = [...leakGroups.values()].sort((a, b) => b.bytes - a.bytes).slice(0, 50);
  table('leaks', ['device', 'kind', 'bytes', 'allocations', 'stacks', 'growth (¼ ½ ¾ end)', 'where'], leakRows.map((l) => ({
    title: stackText(l.stack), cells: [devName(l.device), l.kind, num(bytes(l.bytes)), num(l.count.toLocaleString()),
      num(l.stacks), l.growth.map(bytes).join(' → '), l.label] })));
  table('spikes', ['from', 'to', 'rise', 'max', 'thread', 'its pinned bytes', 'where'], D.pinned.spikes.map((p) => ({
    title: stackText(p.stack), cells: [secs(p.start), secs(p.end), num(bytes(p.rise)), num(bytes(p.max)), p.thread || `#${p.thread_index}`,
      num(bytes(p.thread_bytes)), p.stack >= 0 ? groupOf(p.stack).label : ''] })));
  table('owners', ['device', 'owner', 'own peak', 'at the device peak', 'at the end', 'allocations'], D.owners.map((o) => ({
    cells: [devName(o.device), o.display_name, num(bytes(o.peak_bytes)), num(bytes(o.bytes_at_device_peak)), num(bytes(o.live_bytes_at_end)), num(o.allocations.toLocaleString())] })));
  table('driver', ['device', 'samples', 'driver: used max', 'traced then', 'not explained by the trace', 'not explained, last sample'], D.driver_memory.map((d) => ({
    cells: [devName(d.device), num(d.samples), num(bytes(d.used_max)), num(bytes(d.traced_at_max)), num(bytes(d.unexplained_at_max)), num(bytes(d.unexplained_last))] })));
  const hl = D.health;
  table('health', ['what', 'value'], [['events', hl.events], ['allocations', hl.allocations], ['frees', hl.frees],
    ['frees of nothing live', hl.unmatched_frees], ['failed allocations', hl.failed_allocations], ['events dropped', hl.dropped_events],
    ['stack unwind failures', hl.unwind_failures], ['stacks cut at the depth limit', hl.truncated_stacks],
    ['Python stack failures', hl.python_failures], ['time in the recorder', secs(hl.recorder_time_ns)],
    ...hl.notices.map((n) => ['notice', n])].map((r) => ({ cells: r })));

  if (location.hash.includes('user-frames')) $('useronly').checked = true;
  drawTimeline();
  drawPinned();
  drawBlockMap();
  const firstPeak = D.peaks.find((p) => p.snapshot >= 0 && p.device >= 0) || D.peaks.find((p) => p.snapshot >= 0);
  if (firstPeak) show({ i: firstPeak.snapshot, snap: D.snapshots[firstPeak.snapshot], sc: D.snapshots[firstPeak.snapshot].scopes[0] }, 'peak');
  else show(null);
  window.addEventListener('resize', () => { drawTimeline(); drawPinned(); if (shown) show(shown, ''); });

  // ---- self-check: what a test (or a suspicious reader) can verify without a debugger ----
  const drawnAt = performance.now();
  const firstIcicle = drawn.icicle || 0;
  const check = $('cumem-selfcheck');
  if (location.hash.includes('selftest')) {
    // Press every one-click moment (each peak, each OOM) and a click on the chart; record what each drew.
    const results = [];
    const first = current;
    seriesList.forEach((s, i) => { if (s.kind === 'total') { current = i; drawTimeline(); } });
    current = first;
    drawTimeline();
    for (const b of quick.querySelectorAll('button')) {
      b.click();
      results.push(`${b.className || 'peak'}:${drawn.icicle || 0}`);
    }
    const rect = chart.getBoundingClientRect();
    const at = rect.left + rect.width / 2;
    chart.dispatchEvent(new MouseEvent('mousedown', { clientX: at, clientY: rect.top + 50 }));
    chart.dispatchEvent(new MouseEvent('mouseup', { clientX: at, clientY: rect.top + 50 }));
    results.push(`chart:${$('live-head').textContent.length > 0 ? 1 : 0}`);
    check.dataset.quick = results.join(',');
  }
  const resources = performance.getEntriesByType('resource').length;
  check.dataset.status = errors.length || blocked.length || resources ? 'error' : 'ok';
  check.dataset.errors = errors.join(' | ');
  check.dataset.blocked = blocked.join(' ');
  check.dataset.resources = resources;
  check.dataset.points = drawn.points;
  check.dataset.phaseBands = drawn.bands;
  check.dataset.mapBlocks = drawn.mapBlocks || 0;
  check.dataset.icicleBoxes = firstIcicle;
  check.dataset.seriesMax = Object.entries(drawn.max).map(([k, v]) => `${k}=${v}`).join(',');
  check.dataset.renderMs = (drawnAt - t0).toFixed(1);
  check.dataset.loadMs = drawnAt.toFixed(1);
  check.textContent = `drawn: ${drawn.points} points`;
  }
})();
