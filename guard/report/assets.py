"""The report's inlined stylesheet and script (no external resources, no framework).

The script reads each episode's JSON data and, when a decision is chosen (a timeline button or a
proposal node in the graph), marks the records that decision selected (``sel``), the proposal
(``cur``), the private-source → sink path (``onpath``) and the edges into the proposal (``into``),
and shows that decision's detail panel.  ``section.dataset.current`` holds the chosen decision.
"""

from __future__ import annotations

CSS = """
:root { --ink:#1f2328; --muted:#656d76; --line:#d0d7de; --bg:#f6f8fa; --ok:#1a7f37; --bad:#cf222e;
  --warn:#bf8700; --sel:#ffd33d; --path:#d1242f; --e1:#6e7781; --e2:#0969da; --e3:#8250df; --e4:#1a7f37; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif;
  color:var(--ink); }
header { background:#24292f; color:#fff; padding:10px 20px; }
header h1 { margin:0; font-size:18px; font-weight:600; }
main { padding:8px 20px 40px; }
h2 { font-size:17px; border-bottom:1px solid var(--line); padding-bottom:4px; margin-top:28px; word-break:break-all; }
h3 { font-size:15px; margin:14px 0 6px; } h4 { font-size:14px; margin:4px 0 6px; }
h5 { font-size:13px; margin:12px 0 4px; }
code { font:12px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; background:var(--bg); padding:0 3px;
  border-radius:3px; word-break:break-all; }
pre { white-space:pre-wrap; word-break:break-word; font:12px/1.4 ui-monospace, Menlo, Consolas, monospace;
  background:var(--bg); padding:6px; margin:4px 0; max-height:280px; overflow:auto; }
a { color:#0969da; } a.anchor { text-decoration:none; color:var(--muted); }
.muted { color:var(--muted); } p.meta { color:var(--muted); font-size:13px; }
p.meta strong { color:var(--ink); font-weight:600; }
.note { background:#fff8c5; border:1px solid #eed888; padding:6px 10px; border-radius:6px; }
.error { color:var(--bad); }
.cards { display:flex; flex-wrap:wrap; gap:8px; margin:8px 0; }
.card { border:1px solid var(--line); border-radius:6px; padding:6px 12px; min-width:110px; background:#fff; }
.card .big { font-size:20px; font-weight:600; }
.pill { display:inline-block; padding:0 7px; border-radius:10px; font-size:12px; font-weight:600; color:#fff;
  background:var(--muted); }
.verdict-execute { background:var(--ok); } .verdict-escalate, .verdict-abstain { background:var(--bad); }
.verdict-defer, .verdict-probe { background:var(--warn); }
.pill-ok { background:var(--ok); } .pill-bad { background:var(--bad); } .pill-muted { background:#8c959f; }
.tag { display:inline-block; padding:0 5px; border-radius:4px; font-size:11px; border:1px solid var(--line);
  color:var(--muted); }
.tag-private { border-color:var(--bad); color:var(--bad); } .tag-untrusted { border-color:#bc4c00; color:#bc4c00; }
.tag-sink { border-color:#0969da; color:#0969da; } .tag-error { border-color:var(--bad); color:var(--bad); }
table.grid { border-collapse:collapse; margin:4px 0; font-size:13px; }
table.grid th, table.grid td { border:1px solid var(--line); padding:2px 7px; text-align:left; vertical-align:top; }
table.grid th { background:var(--bg); } table.features tr.on td { background:#fff1f0; }
table.features tfoot td { font-weight:600; }
dl.kv { display:grid; grid-template-columns:max-content 1fr; gap:1px 12px; margin:6px 0; }
dl.kv dt { color:var(--muted); } dl.kv dd { margin:0; word-break:break-all; }
.graph-wrap { overflow-x:auto; border:1px solid var(--line); border-radius:6px; background:#fff; margin-top:10px; }
svg.graph { display:block; }
svg.graph .lane { stroke:#eaeef2; stroke-width:1; }
svg.graph .lane-name { font-size:11px; fill:var(--muted); }
.edge { fill:none; stroke-width:1.6; opacity:.9; }
.edge.E1 { stroke:var(--e1); } .edge.E2 { stroke:var(--e2); stroke-dasharray:6 3; }
.edge.E3 { stroke:var(--e3); stroke-dasharray:2 3; } .edge.E4 { stroke:var(--e4); stroke-dasharray:9 3 2 3; }
.arrow-E1 path { fill:var(--e1); } .arrow-E2 path { fill:var(--e2); } .arrow-E3 path { fill:var(--e3); }
.arrow-E4 path { fill:var(--e4); } .arrow-path path { fill:var(--path); }
svg.has-cur .edge { opacity:.28; }
svg.has-cur .edge.into { opacity:.95; stroke-width:2.4; }
svg.has-cur .edge.onpath, .edge.onpath { stroke:var(--path); stroke-width:3.4; opacity:1; }
.node { cursor:pointer; }
.node .shape { fill:#fff; stroke:#57606a; stroke-width:1.5; }
.node.kind-user .shape { fill:#ddf4ff; } .node.kind-final .shape { fill:#ddf4ff; stroke-dasharray:3 2; }
.node.kind-proposal .shape { fill:#eaeef2; } .node.kind-result .shape { fill:#fff; }
.node.kind-unknown .shape { fill:#f6f8fa; stroke:#afb8c1; stroke-dasharray:2 2; }
.node.kind-unknown .num { fill:#8c959f; }
.node.executed .shape { fill:#dafbe1; stroke:var(--ok); }
.node.refused .shape { fill:#ffebe9; stroke:var(--bad); stroke-width:2.5; }
.node.private .shape { stroke:var(--bad); stroke-width:3; fill:#fff0f0; }
.node.untrusted .shape { stroke:#bc4c00; stroke-width:2.5; stroke-dasharray:4 2; fill:#fff8f2; }
.node .halo { fill:none; stroke:none; }
.node.sel .halo { fill:var(--sel); opacity:.75; }
.node.onpath .halo { stroke:var(--path); stroke-width:2.5; }
.node.cur .halo { fill:#0969da; opacity:.35; stroke:#0969da; stroke-width:2; }
.node.cur .shape { stroke-width:3.5; }
.node .num { font-size:11px; text-anchor:middle; font-weight:600; fill:var(--ink); pointer-events:none; }
.node .lbl { font-size:9.5px; text-anchor:middle; fill:var(--muted); pointer-events:none; }
.legend { display:flex; flex-wrap:wrap; gap:6px 16px; margin:6px 0 4px; font-size:12px; color:var(--muted); }
.legend-item { display:inline-flex; align-items:center; gap:4px; }
.key { display:inline-block; width:14px; height:14px; border-radius:3px; border:2px solid; }
.key-private { border-color:var(--bad); background:#fff0f0; }
.key-untrusted { border-color:#bc4c00; border-style:dashed; }
.key-cur { background:#0969da55; border-color:#0969da; }
.key-sel { background:var(--sel); border-color:var(--sel); }
.key-path { background:var(--path); border-color:var(--path); height:4px; }
.columns { display:grid; grid-template-columns:minmax(300px, 1fr) minmax(360px, 1.15fr); gap:18px;
  align-items:start; }
@media (max-width: 900px) { .columns { grid-template-columns:1fr; } }
ol.timeline { list-style:none; padding:0; margin:0; }
ol.timeline li.rec { border-left:3px solid var(--line); padding:4px 8px; margin:0 0 4px; background:#fff; }
li.rec.kind-user, li.rec.kind-final { border-left-color:#54aeff; } li.rec.kind-proposal { border-left-color:#57606a; }
li.rec.kind-result { border-left-color:#d0d7de; } li.rec.kind-unknown { color:var(--muted); font-style:italic; }
li.rec.after-stop { opacity:.5; } li.rec.flash { outline:2px solid var(--sel); }
li.rec .idx { font-weight:600; color:var(--muted); }
li.rec .kind { font-size:12px; text-transform:uppercase; color:var(--muted); }
li.rec .text { margin-top:2px; } li.rec details.text summary { cursor:pointer; color:#424a53; }
li.rec .args { margin:2px 0; }
button.dec { display:block; width:100%; text-align:left; margin:3px 0; padding:4px 6px; border:1px solid var(--line);
  border-radius:6px; background:var(--bg); cursor:pointer; font:inherit; }
button.dec:hover { border-color:#0969da; }
button.dec.active { border-color:#0969da; background:#ddf4ff; box-shadow:0 0 0 2px #54aeff66; }
.detail-col { position:sticky; top:6px; }
.detail { border:1px solid var(--line); border-radius:6px; padding:8px 12px; background:#fff; }
.detail .reason { font-size:14px; }
.scorebar { position:relative; height:12px; background:var(--bg); border:1px solid var(--line); border-radius:6px;
  margin:6px 0 2px; }
.bar-fill { position:absolute; left:0; top:0; bottom:0; border-radius:6px; }
.bar-fill.under { background:#4ac26b; } .bar-fill.over { background:#fa4549; }
.bar-lambda { position:absolute; top:-4px; bottom:-4px; border-left:2px dashed #24292f; }
.score-line { margin:0 0 6px; }
svg.histogram .axis { stroke:#57606a; } svg.histogram .tick { font-size:10px; fill:var(--muted); }
svg.histogram .bar-ok { fill:#4ac26b; } svg.histogram .bar-refused { fill:#fa4549; }
svg.histogram .lambda { stroke:#24292f; stroke-width:1.5; stroke-dasharray:5 3; }
svg.histogram .lambda-label { font-size:11px; fill:#24292f; }
img.frontier { max-width:100%; border:1px solid var(--line); border-radius:6px; }
.bool-true { color:var(--ok); } .bool-false { color:var(--bad); }
ul.chips { list-style:none; padding:0; margin:2px 0 6px; display:flex; flex-wrap:wrap; gap:4px; }
ul.chips li { border:1px solid var(--line); border-radius:12px; padding:0 8px; background:#fffbe6; font-size:12px; }
.safecommit { border-left:3px solid var(--warn); padding-left:8px; }
"""

SCRIPT = """
(function () {
  "use strict";
  function asSet(list) { return new Set((list || []).map(String)); }
  function choose(section, number) {
    var data = section._data, d = data.decisions[number];
    if (!d) { return; }
    var prefix = section.getAttribute("data-prefix");
    var svg = section.querySelector("svg.graph");
    var sel = asSet(d.selected), pathNodes = asSet(d.pathNodes);
    var pathEdges = asSet(d.pathEdges), into = asSet(d.edgesIn);
    var cur = d.node === null ? null : String(d.node);
    section.dataset.current = String(number);
    svg.classList.add("has-cur");
    svg.querySelectorAll(".node").forEach(function (g) {
      var i = g.getAttribute("data-index");
      g.classList.toggle("sel", sel.has(i));
      g.classList.toggle("onpath", pathNodes.has(i));
      g.classList.toggle("cur", i === cur);
    });
    svg.querySelectorAll(".edge").forEach(function (e) {
      var key = e.getAttribute("data-edge"), on = pathEdges.has(key);
      e.classList.toggle("onpath", on);
      e.classList.toggle("into", into.has(key));
      e.setAttribute("marker-end", "url(#" + prefix + "-arrow-" + (on ? "path" : e.getAttribute("data-etype")) + ")");
    });
    section.querySelectorAll("button.dec").forEach(function (b) {
      var active = b.getAttribute("data-dec") === String(number);
      b.classList.toggle("active", active);
      b.setAttribute("aria-pressed", active ? "true" : "false");
    });
    section.querySelectorAll(".detail").forEach(function (el) {
      el.hidden = el.getAttribute("data-dec") !== String(number);
    });
  }
  function flash(section, index) {
    var row = section.querySelector('li.rec[data-index="' + index + '"]');
    if (!row) { return; }
    row.scrollIntoView({ block: "nearest" });
    row.classList.add("flash");
    setTimeout(function () { row.classList.remove("flash"); }, 900);
  }
  document.querySelectorAll("section.episode").forEach(function (section) {
    section._data = JSON.parse(section.querySelector("script.episode-data").textContent);
    section.addEventListener("click", function (event) {
      var button = event.target.closest("button.dec");
      if (button) { choose(section, Number(button.getAttribute("data-dec"))); return; }
      var node = event.target.closest(".node");
      if (!node) { return; }
      var index = Number(node.getAttribute("data-index"));
      var hits = section._data.decisions.map(function (d, k) { return d.node === index ? k : -1; })
        .filter(function (k) { return k >= 0; });
      if (hits.length) { choose(section, hits[hits.length - 1]); }
      flash(section, index);
    });
    if (section._data.initial !== null) { choose(section, section._data.initial); }
  });
})();
"""
