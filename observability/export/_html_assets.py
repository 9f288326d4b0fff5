"""The HTML export's inline stylesheet and script. Inline on purpose: the file must open anywhere, offline, with
nothing fetched (no CDN, no web fonts, no images). The script draws the waterfall from the JSON island the page
carries and only ever sets `textContent`, never HTML."""

CSS = """
:root {
  --bg: #f4f6f9; --panel: #ffffff; --ink: #1b2333; --muted: #667085; --line: #e4e8ef; --soft: #f0f3f8;
  --allowed: #22a06b; --approved: #1b8a7a; --denied: #e5484d; --rejected: #b4233a; --parked: #f2a516;
  --unknown: #8b5cf6; --pending: #a0a9b8; --model: #3b82f6; --model-error: #e5484d; --turn: #dfe6f1;
  --mono: ui-monospace, SFMono-Regular, "SF Mono", Menlo, Consolas, "Liberation Mono", monospace;
  --sans: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, "Noto Sans", sans-serif;
  --label: 250px;
}
* { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; }
body { margin: 0; background: var(--bg); color: var(--ink); font: 14px/1.45 var(--sans); }
code, pre, .mono { font-family: var(--mono); font-size: 12.5px; }
a { color: inherit; }
.top { background: linear-gradient(135deg, #0f172a 0%, #1e2b4d 55%, #283a6b 100%); color: #eef2ff;
  padding: 26px 36px 30px; }
.brand { font-size: 11px; letter-spacing: .22em; text-transform: uppercase; color: #9fb0d8; font-weight: 600; }
.brand b { color: #fff; }
h1 { margin: 6px 0 8px; font-size: 24px; font-weight: 650; line-height: 1.25; word-break: break-word; }
.ids { display: flex; flex-wrap: wrap; gap: 8px 12px; align-items: center; color: #c7d2ee; }
.ids code { background: rgba(255,255,255,.08); padding: 2px 7px; border-radius: 6px; color: #fff; }
.badge { display: inline-block; padding: 2px 10px; border-radius: 999px; font-size: 12px; font-weight: 650;
  letter-spacing: .02em; background: #475467; color: #fff; }
.badge.st-completed { background: #16a34a; } .badge.st-failed, .badge.st-incomplete { background: #dc2626; }
.badge.st-awaiting_approval { background: #d97706; } .badge.st-active { background: #2563eb; }
.badge.st-idle { background: #64748b; }
.badge.fork { background: rgba(255,255,255,.12); color: #dbe4ff; font-weight: 500; }
.facts { display: grid; grid-template-columns: repeat(auto-fit, minmax(220px, 1fr)); gap: 10px 28px;
  margin: 18px 0 0; }
.facts div { min-width: 0; }
.facts dt { font-size: 11px; text-transform: uppercase; letter-spacing: .08em; color: #93a4cc; }
.facts dd { margin: 2px 0 0; color: #f1f5ff; overflow-wrap: anywhere; }
.facts dd.ok { color: #86efac; } .facts dd.bad { color: #fca5a5; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(130px, 1fr)); gap: 12px; margin-top: 22px; }
.card { background: rgba(255,255,255,.07); border: 1px solid rgba(255,255,255,.1); border-radius: 12px;
  padding: 12px 14px; }
.card .n { font-size: 26px; font-weight: 700; color: #fff; font-variant-numeric: tabular-nums; }
.card .k { font-size: 12px; color: #aab8dc; }
.card.warn .n { color: #fca5a5; } .card.violet .n { color: #c4b5fd; }
main { padding: 22px 36px 40px; display: grid; gap: 22px; }
.panel { background: var(--panel); border: 1px solid var(--line); border-radius: 14px; padding: 18px 20px;
  box-shadow: 0 1px 2px rgba(16,24,40,.04), 0 4px 14px rgba(16,24,40,.04); }
.panel-head { display: flex; flex-wrap: wrap; align-items: baseline; justify-content: space-between; gap: 10px;
  margin-bottom: 12px; }
h2 { margin: 0; font-size: 17px; } h2 .muted, h3 .muted { font-weight: 400; }
h3 { margin: 0 0 8px; font-size: 15px; }
h4 { margin: 14px 0 6px; font-size: 12px; text-transform: uppercase; letter-spacing: .07em; color: var(--muted); }
.muted { color: var(--muted); }
.legend { display: flex; flex-wrap: wrap; gap: 6px; margin: 0; padding: 0; list-style: none; }
.legend li { display: inline-flex; align-items: center; gap: 6px; padding: 3px 10px 3px 8px; border-radius: 999px;
  border: 1px solid var(--line); background: var(--soft); font-size: 12px; cursor: pointer; user-select: none; }
.legend li.off { opacity: .4; text-decoration: line-through; }
.sw { width: 12px; height: 12px; border-radius: 3px; display: inline-block; flex: none; }
.cat-allowed { --c: var(--allowed); } .cat-approved { --c: var(--approved); } .cat-denied { --c: var(--denied); }
.cat-rejected { --c: var(--rejected); } .cat-parked { --c: var(--parked); } .cat-unknown { --c: var(--unknown); }
.cat-pending { --c: var(--pending); } .cat-model { --c: var(--model); } .cat-model-error { --c: var(--model-error); }
.cat-turn { --c: #94a3b8; }
.sw { background: var(--c); }
.sw.hatch { background: repeating-linear-gradient(135deg, var(--allowed) 0 3px, #fff 3px 5px); }
.sw.model { border-radius: 999px; }

/* waterfall */
.waterfall { position: relative; font-size: 12.5px; }
.wf-axis, .wf-row { display: grid; grid-template-columns: var(--label) 1fr; align-items: center; }
.wf-axis { height: 26px; border-bottom: 1px solid var(--line); color: var(--muted); font-size: 11px; }
.wf-axis-track, .wf-track { position: relative; height: 100%; margin: 0 64px 0 8px; }
.wf-tick { position: absolute; top: 6px; transform: translateX(-50%); white-space: nowrap;
  font-variant-numeric: tabular-nums; }
.wf-tick:first-child { transform: none; }
.wf-break-label { position: absolute; top: 5px; transform: translateX(-50%); white-space: nowrap; color: #7c6f57;
  background: #fff7e6; border: 1px solid #f3e1b8; border-radius: 6px; padding: 0 5px; font-size: 10.5px; }
.wf-body { position: relative; }
.wf-grid { position: absolute; top: 0; bottom: 0; left: var(--label); right: 0; pointer-events: none; }
.wf-grid-inner { position: absolute; top: 0; bottom: 0; left: 8px; right: 64px; }
.wf-line { position: absolute; top: 0; bottom: 0; width: 1px; background: var(--line); }
.wf-break { position: absolute; top: 0; bottom: 0;
  background: repeating-linear-gradient(135deg, #fbf3e2 0 6px, #ffffff 6px 12px); border-left: 1px dashed #e8d3a4;
  border-right: 1px dashed #e8d3a4; }
.wf-mark { position: absolute; top: 0; bottom: 0; width: 0; border-left: 1px dashed #94a3b8; }
.wf-row { min-height: 26px; position: relative; }
.wf-row:hover { background: rgba(59,130,246,.05); }
.wf-row.turn { margin-top: 8px; border-top: 1px solid var(--line); padding-top: 2px; }
.wf-label { display: flex; align-items: baseline; gap: 8px; padding: 3px 10px 3px 4px; min-width: 0;
  white-space: nowrap; overflow: hidden; }
.wf-label .name { overflow: hidden; text-overflow: ellipsis; }
.wf-label .sub { color: var(--muted); font-family: var(--mono); font-size: 11px; overflow: hidden;
  text-overflow: ellipsis; }
.wf-row.turn .wf-label .name { font-weight: 650; }
.wf-row.model .wf-label, .wf-row.call .wf-label { padding-left: 22px; }
.wf-row.model .wf-label .name { color: #2b5fb8; }
.wf-row.lifecycle .wf-label .name { color: var(--muted); font-style: italic; }
.wf-track { height: 26px; }
.bar { position: absolute; top: 6px; height: 14px; min-width: 4px; border-radius: 4px; background: var(--c);
  box-shadow: inset 0 -1px 0 rgba(0,0,0,.12); cursor: pointer; transition: filter .12s, opacity .12s; }
.bar:hover { filter: brightness(1.08) saturate(1.1); box-shadow: 0 0 0 2px rgba(15,23,42,.18); }
.bar.turn { top: 4px; height: 18px; background: var(--turn); border: 1px solid #c9d4e5; box-shadow: none; }
.bar.model { top: 8px; height: 10px; border-radius: 999px; }
.bar.err { background: repeating-linear-gradient(135deg, var(--c) 0 4px, rgba(255,255,255,.55) 4px 6px);
  outline: 1.5px solid var(--denied); outline-offset: 0; }
.bar.inherited { opacity: .55; }
.bar-text { position: absolute; top: 5px; white-space: nowrap; color: var(--muted); font-size: 11px;
  font-variant-numeric: tabular-nums; pointer-events: none; }
.diamond { position: absolute; top: 8px; width: 10px; height: 10px; margin-left: -5px; transform: rotate(45deg);
  background: #64748b; border-radius: 2px; cursor: default; }
.diamond.ended { background: #16a34a; } .diamond.forked { background: #0ea5e9; }
.diamond.parked { background: var(--parked); } .diamond.interrupted { background: var(--denied); }
.waterfall.dim-allowed .bar.cat-allowed, .waterfall.dim-approved .bar.cat-approved,
.waterfall.dim-denied .bar.cat-denied, .waterfall.dim-rejected .bar.cat-rejected,
.waterfall.dim-parked .bar.cat-parked, .waterfall.dim-unknown .bar.cat-unknown,
.waterfall.dim-pending .bar.cat-pending, .waterfall.dim-model .bar.model { opacity: .12; }
.tip { position: fixed; z-index: 10; max-width: 460px; background: #0f172a; color: #e2e8f0; border-radius: 8px;
  padding: 8px 10px; font-size: 12px; box-shadow: 0 8px 24px rgba(0,0,0,.25); pointer-events: none; display: none; }
.tip b { color: #fff; } .tip div { overflow-wrap: anywhere; }
.empty { color: var(--muted); padding: 14px 4px; }

/* calls */
.turn-block { border-top: 1px solid var(--line); padding-top: 14px; margin-top: 14px; }
.turn-block:first-of-type { border-top: 0; margin-top: 0; padding-top: 0; }
.say { margin: 0 0 10px; padding: 8px 12px; border-left: 3px solid #c7d2fe; background: #f5f7ff;
  border-radius: 0 8px 8px 0; overflow-wrap: anywhere; }
.say > :first-child { margin-top: 0; } .say > :last-child { margin-bottom: 0; }
.md p, .md ul, .md ol { margin: 0 0 8px; } .md ul, .md ol { padding-left: 22px; }
.md pre.md-code { background: #0f172a; color: #e2e8f0; padding: 8px 10px; border-radius: 6px; overflow-x: auto;
  white-space: pre; font-size: 12px; margin: 0 0 8px; }
.md code { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; }
.md :not(pre) > code { background: #e8ebf7; padding: 0 4px; border-radius: 4px; }
.md blockquote { margin: 0 0 8px; padding-left: 10px; border-left: 3px solid #d0d5dd; color: #475467; }
.md .md-h { margin: 6px 0; } .md .md-url { color: var(--muted); }
.prompt { display: flex; gap: 8px; margin: 0 0 8px; padding: 8px 12px; background: #f9fafb;
  border: 1px solid var(--line); border-radius: 8px; }
.prompt .who { font-weight: 600; color: #344054; flex: none; }
.prompt .words { white-space: pre-wrap; overflow-wrap: anywhere; }
.model-line { color: var(--muted); font-size: 12px; margin: 0 0 8px; }
details.call { border: 1px solid var(--line); border-left: 4px solid var(--c); border-radius: 10px; margin: 8px 0;
  background: #fff; }
details.call[open] { box-shadow: 0 2px 10px rgba(16,24,40,.06); }
details.call.flash { animation: flash 1.2s ease-out; }
@keyframes flash { 0% { box-shadow: 0 0 0 4px rgba(59,130,246,.45); } 100% { box-shadow: 0 0 0 0 rgba(59,130,246,0); } }
details.call > summary { display: flex; flex-wrap: wrap; align-items: center; gap: 8px; padding: 9px 12px;
  cursor: pointer; list-style: none; }
details.call > summary::-webkit-details-marker { display: none; }
details.call > summary::before { content: "\\25B8"; color: var(--muted); transition: transform .12s; }
details.call[open] > summary::before { transform: rotate(90deg); }
.chip { display: inline-block; padding: 1px 8px; border-radius: 999px; font-size: 11.5px; font-weight: 650;
  color: #fff; background: var(--c); }
.tool { font-weight: 650; }
.cid { color: var(--muted); }
.outcome { font-size: 12px; padding: 0 6px; border-radius: 5px; background: var(--soft); }
.outcome.o-ok { color: #15803d; } .outcome.o-error, .outcome.o-timeout, .outcome.o-denied { color: #b91c1c; }
.outcome.o-unknown { color: #6d28d9; }
.dur { color: var(--muted); font-variant-numeric: tabular-nums; font-size: 12px; }
.sum { flex: 1 1 320px; min-width: 0; color: #475467; font-family: var(--mono); font-size: 12px; white-space: nowrap;
  overflow: hidden; text-overflow: ellipsis; }
.inh { font-size: 11px; color: #0369a1; background: #e0f2fe; border-radius: 5px; padding: 0 6px; }
.call-body { padding: 0 14px 14px 30px; }
.kv { display: flex; flex-wrap: wrap; gap: 4px 18px; color: #475467; font-size: 12.5px; }
.kv b { color: var(--ink); font-weight: 600; }
ol.steps { margin: 0; padding: 0; list-style: none; counter-reset: s; }
ol.steps li { counter-increment: s; display: grid; grid-template-columns: 26px 130px 90px 1fr; gap: 8px;
  padding: 4px 0; border-bottom: 1px dashed var(--line); align-items: baseline; }
ol.steps li::before { content: counter(s); color: var(--muted); font-size: 11px; text-align: right; }
.step-check { font-family: var(--mono); font-size: 12px; }
.step-out { font-size: 11.5px; font-weight: 650; text-transform: uppercase; letter-spacing: .04em; }
.step-out.pass { color: #15803d; } .step-out.stop { color: #b91c1c; } .step-out.ask { color: #b45309; }
.step-detail { overflow-wrap: anywhere; color: #475467; }
pre.code { margin: 0; padding: 10px 12px; background: #0f172a; color: #e2e8f0; border-radius: 8px; overflow: auto;
  max-height: 340px; white-space: pre-wrap; overflow-wrap: anywhere; }
pre.code.err { background: #2a0f14; color: #fecdd3; }
.more { color: var(--muted); font-size: 12px; margin-top: 4px; }
table.rows { width: 100%; border-collapse: collapse; font-size: 12.5px; }
table.rows th { text-align: left; color: var(--muted); font-weight: 600; font-size: 11px; text-transform: uppercase;
  letter-spacing: .06em; padding: 4px 8px; border-bottom: 1px solid var(--line); }
table.rows td { padding: 5px 8px; border-bottom: 1px solid var(--soft); vertical-align: top; overflow-wrap: anywhere; }
table.rows td.num { text-align: right; font-variant-numeric: tabular-nums; color: var(--muted); white-space: nowrap; }
.msg { display: grid; grid-template-columns: 90px 1fr; gap: 10px; padding: 8px 0;
  border-bottom: 1px solid var(--soft); }
.msg .role { font-weight: 650; color: var(--muted); text-transform: uppercase; font-size: 11px; letter-spacing: .06em;
  padding-top: 2px; }
.msg .role.assistant { color: #4f46e5; }
.msg .blk { white-space: pre-wrap; overflow-wrap: anywhere; margin-bottom: 4px; }
.msg .blk.use, .msg .blk.res { font-family: var(--mono); font-size: 12px; color: #475467; }
details.fold > summary { cursor: pointer; font-weight: 600; }
footer { padding: 0 36px 30px; color: var(--muted); font-size: 12px; }
@media (max-width: 900px) { :root { --label: 170px; } .top, main { padding-left: 16px; padding-right: 16px; } }
@media print { .tip { display: none !important; } details.call { break-inside: avoid; } }
"""

JS = r"""
(function () {
  "use strict";
  var island = document.getElementById("strata-data");
  var root = document.getElementById("waterfall");
  if (!island || !root) { return; }
  var data = JSON.parse(island.textContent);

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    return e;
  }
  function pct(x) { return (Math.max(0, Math.min(1, x)) * 100).toFixed(4) + "%"; }

  root.textContent = "";
  if (!data.rows.length) {
    root.appendChild(el("div", "empty", "No turns were recorded in this session."));
    return;
  }

  var axis = el("div", "wf-axis");
  axis.appendChild(el("div", "wf-label muted", "time since start"));
  var axisTrack = el("div", "wf-axis-track");
  data.ticks.forEach(function (t) {
    var k = el("span", "wf-tick", t.label);
    k.style.left = pct(t.x);
    axisTrack.appendChild(k);
  });
  data.breaks.forEach(function (b) {
    var k = el("span", "wf-break-label", "\u22EF " + b.label + " \u22EF");
    k.style.left = pct((b.x0 + b.x1) / 2);
    axisTrack.appendChild(k);
  });
  axis.appendChild(axisTrack);
  root.appendChild(axis);
  // A label that would overlap one already kept (a break's first, then the ticks left to right) is hidden; its
  // grid line stays. Redone when the page is resized (the track's width changes, the labels' do not).
  function declutter() {
    var kept = [];
    var labels = Array.prototype.slice.call(axisTrack.querySelectorAll(".wf-break-label"))
      .concat(Array.prototype.slice.call(axisTrack.querySelectorAll(".wf-tick")));
    labels.forEach(function (k) {
      k.style.visibility = "";
      k.removeAttribute("data-hidden");
      var r = k.getBoundingClientRect();
      var clash = kept.some(function (o) { return r.left < o.right + 6 && o.left < r.right + 6; });
      if (clash) { k.style.visibility = "hidden"; k.setAttribute("data-hidden", "overlap"); }
      else { kept.push(r); }
    });
    axisTrack.setAttribute("data-labels-shown", String(kept.length));
  }
  declutter();
  window.addEventListener("resize", declutter);

  var body = el("div", "wf-body");
  var grid = el("div", "wf-grid");
  var inner = el("div", "wf-grid-inner");
  grid.appendChild(inner);
  data.ticks.forEach(function (t) {
    var line = el("div", "wf-line");
    line.style.left = pct(t.x);
    inner.appendChild(line);
  });
  data.breaks.forEach(function (b) {
    var strip = el("div", "wf-break");
    strip.style.left = pct(b.x0);
    strip.style.width = pct(b.x1 - b.x0);
    inner.appendChild(strip);
  });
  data.markers.forEach(function (m) {
    var line = el("div", "wf-mark");
    line.style.left = pct(m.x);
    inner.appendChild(line);
  });
  body.appendChild(grid);

  var tip = el("div", "tip");
  document.body.appendChild(tip);
  function showTip(ev, lines) {
    tip.textContent = "";
    lines.forEach(function (line, i) { tip.appendChild(el(i === 0 ? "b" : "div", null, line)); });
    tip.style.display = "block";
    moveTip(ev);
  }
  function moveTip(ev) {
    var w = tip.offsetWidth, h = tip.offsetHeight;
    var x = ev.clientX + 14, y = ev.clientY + 14;
    if (x + w > window.innerWidth - 8) { x = ev.clientX - w - 14; }
    if (y + h > window.innerHeight - 8) { y = ev.clientY - h - 14; }
    tip.style.left = Math.max(4, x) + "px";
    tip.style.top = Math.max(4, y) + "px";
  }
  function hideTip() { tip.style.display = "none"; }
  function hover(node, lines) {
    node.addEventListener("mouseenter", function (ev) { showTip(ev, lines); });
    node.addEventListener("mousemove", moveTip);
    node.addEventListener("mouseleave", hideTip);
  }
  function reveal(id) {
    var target = document.getElementById(id);
    if (!target) { return; }
    if (target.tagName === "DETAILS") { target.open = true; }
    target.scrollIntoView({ behavior: "smooth", block: "center" });
    target.classList.remove("flash");
    void target.offsetWidth;
    target.classList.add("flash");
  }

  if (data.markers.length) {
    var life = el("div", "wf-row lifecycle");
    var lifeLabel = el("div", "wf-label");
    lifeLabel.appendChild(el("span", "name", "lifecycle"));
    life.appendChild(lifeLabel);
    var lifeTrack = el("div", "wf-track");
    data.markers.forEach(function (m) {
      var d = el("div", "diamond " + m.what);
      d.style.left = pct(m.x);
      d.setAttribute("data-seq", m.seq);
      hover(d, [m.what + " (timeline row " + m.seq + ")", m.at, m.summary]);
      lifeTrack.appendChild(d);
    });
    life.appendChild(lifeTrack);
    body.appendChild(life);
  }

  data.rows.forEach(function (r) {
    var row = el("div", "wf-row " + r.kind);
    var label = el("div", "wf-label");
    label.appendChild(el("span", "name", r.label));
    if (r.sub) { label.appendChild(el("span", "sub", r.sub)); }
    label.title = r.label + (r.sub ? " " + r.sub : "");
    row.appendChild(label);
    var track = el("div", "wf-track");
    var bar = el("div", "bar " + r.kind + " cat-" + r.cat + (r.err ? " err" : "") + (r.inherited ? " inherited" : ""));
    bar.style.left = pct(r.x0);
    bar.style.width = pct(r.x1 - r.x0);
    if (r.kind === "call") {
      bar.classList.add("call-bar");
      bar.setAttribute("data-call-id", r.call);
      bar.setAttribute("data-decision", r.cat);
    }
    hover(bar, r.tip);
    if (r.target) {
      bar.addEventListener("click", function () { reveal(r.target); });
      label.style.cursor = "pointer";
      label.addEventListener("click", function () { reveal(r.target); });
    }
    track.appendChild(bar);
    if (r.text) {
      var txt = el("span", "bar-text", r.text);
      if (r.x1 > 0.8) { txt.style.right = "calc(" + pct(1 - r.x0) + " + 6px)"; }
      else { txt.style.left = "calc(" + pct(r.x1) + " + 6px)"; }
      track.appendChild(txt);
    }
    row.appendChild(track);
    body.appendChild(row);
  });
  root.appendChild(body);
  root.setAttribute("data-drawn", String(data.rows.length));

  document.querySelectorAll(".legend li[data-cat]").forEach(function (li) {
    li.addEventListener("click", function () {
      var cls = "dim-" + li.getAttribute("data-cat");
      li.classList.toggle("off");
      root.classList.toggle(cls);
    });
  });
})();
"""
