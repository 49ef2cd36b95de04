"""Inline SVG: the prefix graph as a left-to-right DAG, and the score histogram against λ̂.

The graph is layered by record index (x) and kind (y lane: user turns and final answers on top,
proposals in the middle, results below).  Every edge points forward in time; an edge that skips
records is drawn as a curve that bows away from the lanes it would cross.  Nodes and edges carry
``data-*`` attributes; the report's script adds the highlight classes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from guard.report.model import UNKNOWN, EdgeView, EpisodeView, RecordView

EDGE_TYPES: dict[str, str] = {
    "E1": "call → result",
    "E2": "span / value reuse",
    "E3": "shared identifier",
    "E4": "user intent (user turn → proposal)",
}
LANES: dict[str, int] = {"user": 0, "final": 0, "proposal": 1, "result": 2, UNKNOWN: 2}
LANE_NAMES = ("user / final", "proposals", "results")
DX, LEFT, TOP, LANE_GAP, R = 64, 112, 74, 84, 13


def _xy(index: int, kind: str) -> tuple[float, float]:
    return LEFT + index * DX, TOP + LANES.get(kind, 2) * LANE_GAP


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _toward(x: float, y: float, tx: float, ty: float, distance: float) -> tuple[float, float]:
    """The point ``distance`` from (x, y) in the direction of (tx, ty)."""
    length = math.hypot(tx - x, ty - y) or 1.0
    return x + (tx - x) / length * distance, y + (ty - y) / length * distance


def _edge_path(source: RecordView, target: RecordView) -> str:
    x1, y1 = _xy(source.index, source.kind)
    x2, y2 = _xy(target.index, target.kind)
    span = target.index - source.index
    if span <= 1 and y1 != y2:
        sx, sy = _toward(x1, y1, x2, y2, R + 1)
        ex, ey = _toward(x2, y2, x1, y1, R + 3)
        return f"M{sx:.1f},{sy:.1f} L{ex:.1f},{ey:.1f}"
    bulge = min(95.0, 16.0 + 9.0 * span)
    lane = LANES.get(source.kind, 2)
    below = lane == 2 or (lane == 1 and LANES.get(target.kind, 2) == 2)
    ctrl = max(y1, y2) + bulge if below else min(y1, y2) - bulge
    dx = (x2 - x1) * 0.3
    c1x, c2x = x1 + dx, x2 - dx
    sx, sy = _toward(x1, y1, c1x, ctrl, R + 1)
    ex, ey = _toward(x2, y2, c2x, ctrl, R + 3)
    return f"M{sx:.1f},{sy:.1f} C{c1x:.1f},{ctrl:.1f} {c2x:.1f},{ctrl:.1f} {ex:.1f},{ey:.1f}"


def _node_title(record: RecordView, verdicts: dict[int, str]) -> str:
    parts = [f"#{record.index} {record.kind}"]
    if record.tool:
        parts.append(f"tool {record.tool}")
    if record.private:
        parts.append("private source")
    if record.untrusted:
        parts.append("untrusted source")
    if record.sink:
        parts.append("sink")
    if record.index in verdicts:
        parts.append(f"verdict {verdicts[record.index]}")
    if record.kind == UNKNOWN:
        parts.append("content not in the audit log")
    return ", ".join(parts)


def _node(record: RecordView, prefix: str, verdicts: dict[int, str]) -> str:
    x, y = _xy(record.index, record.kind)
    classes = ["node", f"kind-{record.kind}"]
    classes += [
        c for c, on in (("private", record.private), ("untrusted", record.untrusted), ("sink", record.sink)) if on
    ]
    if record.index in verdicts:
        classes.append("executed" if verdicts[record.index] == "execute" else "refused")
    radius = {"user": R, "final": R, "proposal": 4, "result": 1}.get(record.kind, R)
    label = _short(record.tool or ("not logged" if record.kind == UNKNOWN else record.kind), 12)
    return (
        f'<g class="{" ".join(classes)}" id="{prefix}-n{record.index}" data-index="{record.index}" '
        f'transform="translate({x},{y})"><title>{escape(_node_title(record, verdicts))}</title>'
        f'<rect class="halo" x="{-R - 6}" y="{-R - 6}" width="{2 * R + 12}" height="{2 * R + 12}" rx="{radius + 6}"/>'
        f'<rect class="shape" x="{-R}" y="{-R}" width="{2 * R}" height="{2 * R}" rx="{radius}"/>'
        f'<text class="num" y="4">{record.index}</text>'
        f'<text class="lbl" y="{R + 13}">{escape(label)}</text></g>'
    )


def _markers(prefix: str) -> str:
    out = []
    for etype in [*EDGE_TYPES, "path"]:
        out.append(
            f'<marker id="{prefix}-arrow-{etype}" class="arrow arrow-{etype}" viewBox="0 0 10 10" refX="8" refY="5" '
            'markerUnits="userSpaceOnUse" markerWidth="9" markerHeight="9" orient="auto-start-reverse">'
            '<path d="M0,0 L10,5 L0,10 z"/></marker>'
        )
    return "<defs>" + "".join(out) + "</defs>"


def graph_svg(view: EpisodeView, prefix: str) -> str:
    """The prefix graph of one episode as an inline ``<svg>`` (ids prefixed with ``prefix``)."""
    records = {r.index: r for r in view.records}
    verdicts: dict[int, str] = {}
    for decision in view.decisions:
        if decision.node is not None:
            verdicts[decision.node] = decision.verdict
    width = LEFT + (max(records) + 1 if records else 1) * DX + 40  # x follows the index; audit views may be sparse
    height = TOP + 2 * LANE_GAP + 104
    parts = [
        f'<svg class="graph" id="{prefix}-graph" xmlns="http://www.w3.org/2000/svg" '
        f'style="width:100%;min-width:{width}px;max-width:{width * 3 // 2}px" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="prefix graph of {escape(view.episode_id)}">',
        _markers(prefix),
    ]
    for lane, name in enumerate(LANE_NAMES):
        y = TOP + lane * LANE_GAP
        parts.append(f'<line class="lane" x1="{LEFT - 20}" y1="{y}" x2="{width - 10}" y2="{y}"/>')
        parts.append(f'<text class="lane-name" x="8" y="{y + 4}">{escape(name)}</text>')
    for edge in view.edges:
        if edge.source in records and edge.target in records:
            parts.append(_edge(edge, records, prefix))
    parts.extend(_node(records[i], prefix, verdicts) for i in sorted(records))
    parts.append("</svg>")
    return "".join(parts)


def _edge(edge: EdgeView, records: dict[int, RecordView], prefix: str) -> str:
    title = f"{edge.etype} ({EDGE_TYPES.get(edge.etype, edge.etype)}): #{edge.source} → #{edge.target}"
    if len(edge.types) > 1:
        title += f"; also {', '.join(t for t in edge.types if t != edge.etype)}"
    if edge.args:
        title += f"; via argument {', '.join(edge.args)}"
    path = _edge_path(records[edge.source], records[edge.target])
    return (
        f'<path class="edge {escape(edge.etype)}" data-etype="{escape(edge.etype)}" '
        f'data-edge="{edge.source}-{edge.target}" d="{path}" '
        f'marker-end="url(#{prefix}-arrow-{escape(edge.etype)})"><title>{escape(title)}</title></path>'
    )


def legend_svg(etype: str) -> str:
    """A short line in the style of ``etype`` for the legend."""
    return (
        '<svg class="swatch" width="46" height="12" viewBox="0 0 46 12" aria-hidden="true">'
        f'<path class="edge {escape(etype)}" d="M2,6 L44,6"/></svg>'
    )


# --------------------------------------------------------------------------- histogram


def histogram_svg(scores: Sequence[float], refused: Sequence[bool], thresholds: Sequence[float], bins: int = 24) -> str:
    """Stacked histogram of finite scores (executed / refused) with a dashed line at each threshold."""
    width, height, left, bottom, top = 560, 210, 44, 34, 16
    finite_t = [t for t in thresholds if math.isfinite(t)]
    lo = min([0.0, *scores, *finite_t])
    hi = max([1.0, *scores, *finite_t])
    step = (hi - lo) / bins or 1.0
    ok = [0] * bins
    bad = [0] * bins
    for score, stop in zip(scores, refused, strict=True):
        k = min(bins - 1, int((score - lo) / step))
        (bad if stop else ok)[k] += 1
    peak = max([a + b for a, b in zip(ok, bad, strict=True)] + [1])
    base: float
    plot_w, plot_h = width - left - 12, height - bottom - top

    def x_of(value: float) -> float:
        return left + (value - lo) / (hi - lo) * plot_w

    parts = [
        f'<svg class="histogram" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="score distribution against the threshold">',
        f'<line class="axis" x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}"/>',
        f'<line class="axis" x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}"/>',
        f'<text class="tick" x="{left - 6}" y="{top + 4}" text-anchor="end">{peak}</text>',
        f'<text class="tick" x="{left - 6}" y="{top + plot_h + 4}" text-anchor="end">0</text>',
    ]
    bar_w = plot_w / bins
    for k in range(bins):
        base = top + plot_h
        for count, cls in ((ok[k], "bar-ok"), (bad[k], "bar-refused")):
            if count:
                h = count / peak * plot_h
                base -= h
                what = "refused" if cls == "bar-refused" else "executed"
                label = f"{count} {what} in [{lo + k * step:.3f}, {lo + (k + 1) * step:.3f})"
                parts.append(
                    f'<rect class="{cls}" x="{left + k * bar_w + 1:.1f}" y="{base:.1f}" width="{bar_w - 2:.1f}" '
                    f'height="{h:.1f}"><title>{escape(label)}</title></rect>'
                )
    for tick in range(6):
        value = lo + (hi - lo) * tick / 5
        parts.append(
            f'<text class="tick" x="{x_of(value):.1f}" y="{top + plot_h + 15}" text-anchor="middle">{value:.2f}</text>'
        )
    parts.append(f'<text class="tick" x="{left + plot_w / 2:.1f}" y="{height - 2}" text-anchor="middle">score</text>')
    for t in sorted(set(finite_t)):
        x = x_of(t)
        parts.append(f'<line class="lambda" x1="{x:.1f}" y1="{top - 6}" x2="{x:.1f}" y2="{top + plot_h}"/>')
        parts.append(f'<text class="lambda-label" x="{x + 4:.1f}" y="{top + 4}">λ̂ = {t:.3f}</text>')
    parts.append("</svg>")
    return "".join(parts)
