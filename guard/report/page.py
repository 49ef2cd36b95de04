"""The report page: an overview, then one section per episode (graph, timeline, decision detail).

One self-contained HTML document: the stylesheet and the script are inlined, images are data URIs,
and a Content-Security-Policy forbids every network request, so the file opens from disk and
cannot load anything.  All text is escaped; per-episode data for the script is JSON inside a
``<script type="application/json">`` with ``<``, ``>`` and ``&`` escaped.
"""

from __future__ import annotations

import base64
import json
import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from guard.report.assets import CSS, SCRIPT
from guard.report.model import UNKNOWN, DecisionView, EpisodeView, RecordView
from guard.report.svg import EDGE_TYPES, graph_svg, histogram_svg, legend_svg
from guard.report.values import compact_json, esc, number, render_safecommit, render_value

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'"
TEXT_LIMIT = 4000
VERDICT_ORDER = ("execute", "probe", "defer", "escalate", "abstain")


def script_json(value: Any) -> str:
    """JSON safe inside a ``<script>`` element."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def png_data_uri(data: bytes) -> str:
    """A ``data:image/png;base64`` URI (the bytes must be a PNG)."""
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        raise ValueError("the frontier image is not a PNG file")
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def _pill(verdict: str) -> str:
    return f'<span class="pill verdict-{esc(verdict)}">{esc(verdict)}</span>'


# --------------------------------------------------------------------------- overview


def overview(views: Sequence[EpisodeView], *, notes: Sequence[str] = (), frontier: bytes | None = None) -> str:
    """Verdict counts, the score histogram against λ̂, the frontier plot and links to every episode."""
    decisions = [d for v in views for d in v.decisions]
    verdicts = Counter(d.verdict for d in decisions)
    reasons = Counter(d.reason for d in decisions)
    stopped = sum(1 for v in views if v.stop is not None)
    scored = [d for d in decisions if d.score is not None]
    thresholds = sorted({d.threshold for d in decisions if d.threshold is not None})
    cards = [
        ("episodes", len(views)),
        ("decisions", len(decisions)),
        ("episodes with a refusal", stopped),
        *((f"verdict {k}", verdicts[k]) for k in VERDICT_ORDER if verdicts[k]),
    ]
    card_html = "".join(f'<div class="card"><div class="big">{n}</div><div>{esc(k)}</div></div>' for k, n in cards)
    reason_html = ", ".join(f"<code>{esc(r)}</code> × {n}" for r, n in reasons.most_common())
    lam = ", ".join(esc(number(t)) for t in thresholds) or "—"
    hist = histogram_svg([d.score for d in scored if d.score is not None], [d.refused for d in scored], thresholds)
    unscored = len(decisions) - len(scored)
    parts = [
        '<section id="overview" class="overview"><h2>Overview</h2>',
        "".join(f'<p class="note">{esc(n)}</p>' for n in notes),
        f'<div class="cards">{card_html}</div>',
        f"<p>Reasons: {reason_html or '—'}</p>",
        f"<h3>Score distribution against λ̂ ({lam})</h3>{hist}",
        f'<p class="muted">{len(scored)} scored decisions; {unscored} refused before scoring (not in the histogram).'
        " Bars stack executed (green) and refused (red) decisions; the dashed line is the threshold.</p>",
    ]
    if frontier is not None:
        parts.append(
            "<h3>Risk–utility frontier</h3>"
            f'<img class="frontier" alt="risk–utility frontier from carbguard evaluate" src="{png_data_uri(frontier)}">'
        )
    parts.append(_episode_index(views))
    parts.append("</section>")
    return "".join(parts)


def _episode_index(views: Sequence[EpisodeView]) -> str:
    rows = []
    for k, view in enumerate(views):
        stop = view.stop
        first = f"{_pill(stop.verdict)} <code>{esc(stop.tool)}</code> ({esc(stop.reason)})" if stop else "—"
        scores = [d.score for d in view.decisions if d.score is not None]
        top = number(max(scores)) if scores else "—"
        rows.append(
            f'<tr><td><a href="#ep-{k}">{esc(view.episode_id)}</a></td><td>{len(view.decisions)}</td>'
            f"<td>{sum(d.refused for d in view.decisions)}</td><td>{first}</td><td>{esc(top)}</td></tr>"
        )
    return (
        '<h3>Episodes</h3><table class="grid episodes"><thead><tr><th>episode / session</th><th>decisions</th>'
        f"<th>refused</th><th>first refusal</th><th>max score</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


# --------------------------------------------------------------------------- episode


def episode_section(view: EpisodeView, k: int) -> str:
    """One episode: header, graph with legend, timeline and the detail of every decision."""
    prefix = f"ep{k}"
    stop = view.stop
    initial = stop.number if stop is not None else (view.decisions[-1].number if view.decisions else None)
    summary = (
        f"{'Stopped at' if view.replay else 'First refusal at'} decision {stop.number + 1} of {len(view.decisions)} "
        f"({_pill(stop.verdict)} <code>{esc(stop.tool)}</code>, reason <code>{esc(stop.reason)}</code>)."
        if stop is not None
        else "No decision refused."
    )
    meta = " · ".join(f"{esc(key)} <strong>{esc(value)}</strong>" for key, value in view.meta.items())
    data = {"initial": initial, "decisions": [_decision_data(d) for d in view.decisions]}
    legend = "".join(
        f'<span class="legend-item">{legend_svg(t)} {esc(t)} {esc(n)}</span>' for t, n in EDGE_TYPES.items()
    )
    legend += (
        '<span class="legend-item"><span class="key key-private"></span> private source</span>'
        '<span class="legend-item"><span class="key key-untrusted"></span> untrusted source</span>'
        '<span class="legend-item"><span class="key key-sel"></span> selected for the decision</span>'
        '<span class="legend-item"><span class="key key-path"></span> private-source → sink path</span>'
        '<span class="legend-item"><span class="key key-cur"></span> the decision\'s proposal '
        "(edges into it drawn bold; click a decision or a proposal node to change it)</span>"
    )
    details = "".join(_detail(view, d) for d in view.decisions)
    return (
        f'<section class="episode" id="ep-{k}" data-ep="{k}" data-prefix="{prefix}">'
        f'<h2><a class="anchor" href="#ep-{k}">#</a> {esc(view.episode_id)}</h2>'
        f'<p class="summary">{summary} <a href="#overview">back to overview</a></p>'
        f"{f'<p class=meta>{meta}</p>' if meta else ''}{_scope_note(view)}"
        f'<div class="graph-wrap">{graph_svg(view, prefix)}</div><div class="legend">{legend}</div>'
        f'<div class="columns"><div class="timeline-col"><h3>Timeline</h3>{_timeline(view)}</div>'
        f'<div class="detail-col"><h3>Decision</h3>{details or "<p>No decisions.</p>"}</div></div>'
        f'<script type="application/json" class="episode-data">{script_json(data)}</script></section>'
    )


def _scope_note(view: EpisodeView) -> str:
    if not view.complete:
        return (
            '<p class="note">Built from the audit log alone: only proposals and the edges into them are known; '
            "other records show as grey placeholders. Argument values appear as the log holds them "
            "(hashed unless the policy allows them raw).</p>"
        )
    if view.replay:
        return (
            '<p class="note">Replayed through the guard\'s own decision code. Argument values are hashed as the '
            "audit log would hash them. Records after the first refusal are greyed: in replay the episode ends "
            "there; their decisions are shown for reference only.</p>"
        )
    return ""


def _decision_data(d: DecisionView) -> dict[str, Any]:
    return {
        "node": d.node,
        "selected": list(d.selected),
        "pathNodes": list(d.path_nodes),
        "pathEdges": [f"{u}-{v}" for u, v in d.path_edges],
        "edgesIn": [f"{s}-{d.node}" for s, _ in d.edges_in] if d.node is not None else [],
    }


def _timeline(view: EpisodeView) -> str:
    stop = view.stop
    stop_node = stop.node if stop is not None and view.replay else None
    rows: list[str] = []
    pending: list[int] = []
    for record in view.records:
        if record.kind == UNKNOWN:
            pending.append(record.index)
            continue
        rows.extend(_placeholder(pending))
        pending = []
        late = stop_node is not None and record.index > stop_node
        rows.append(_timeline_row(view, record, late))
    rows.extend(_placeholder(pending))
    unplaced = [d for d in view.decisions if d.node is None]
    rows.extend(f'<li class="rec kind-proposal">{_decision_button(d)}</li>' for d in unplaced)
    return f'<ol class="timeline">{"".join(rows)}</ol>'


def _placeholder(indices: list[int]) -> list[str]:
    if not indices:
        return []
    span = f"#{indices[0]}" if len(indices) == 1 else f"#{indices[0]}–#{indices[-1]}"
    return [f'<li class="rec kind-unknown"><span class="idx">{span}</span> records not in the audit log</li>']


def _timeline_row(view: EpisodeView, record: RecordView, late: bool) -> str:
    classes = f"rec kind-{esc(record.kind)}{' after-stop' if late else ''}"
    badges = _tags(record)
    head = f'<span class="idx">#{record.index}</span> <span class="kind">{esc(record.kind)}</span>'
    if record.tool:
        head += f" <code>{esc(record.tool)}</code>"
    if record.status == "error":
        head += ' <span class="tag tag-error">error</span>'
    body = ""
    if record.kind == "proposal":
        body = f'<div class="args"><code>{esc(compact_json(record.args, 300))}</code></div>'
        body += "".join(_decision_button(d) for d in view.decisions_at(record.index))
    elif record.text:
        body = _text_block(record.text)
    return f'<li class="{classes}" data-index="{record.index}">{head}{badges}{body}</li>'


def _text_block(text: str) -> str:
    shown = text if len(text) <= TEXT_LIMIT else text[:TEXT_LIMIT] + f"\n… ({len(text) - TEXT_LIMIT} more characters)"
    preview = " ".join(text.split())
    preview = preview if len(preview) <= 140 else preview[:139] + "…"
    if len(shown) <= 140 and "\n" not in shown:
        return f'<div class="text">{esc(shown)}</div>'
    return f'<details class="text"><summary>{esc(preview)}</summary><pre>{esc(shown)}</pre></details>'


def _decision_button(d: DecisionView) -> str:
    score = f"score {number(d.score)} vs λ̂ {number(d.threshold)}" if d.score is not None else "not scored"
    late = " after-stop" if d.after_stop else ""
    return (
        f'<button type="button" class="dec{late}" data-dec="{d.number}" aria-pressed="false">'
        f'{_pill(d.verdict)} <code>{esc(d.reason)}</code> <span class="muted">{esc(score)}'
        f"{f', {d.latency_us:.0f} µs' if d.latency_us is not None else ''}</span></button>"
    )


def _detail(view: EpisodeView, d: DecisionView) -> str:
    late = ' <span class="tag">after the stop</span>' if d.after_stop else ""
    parts = [
        f'<div class="detail" data-dec="{d.number}" hidden>',
        f"<h4>Decision {d.number + 1}: <code>{esc(d.tool)}</code> {_pill(d.verdict)}{late}</h4>",
        f'<p class="reason">Reason <code>{esc(d.reason)}</code>: {esc(d.message)}</p>',
        f'<p class="review">Human review: {esc(d.review)}</p>' if d.review else "",
        _score_bar(d),
        f"<p>Proposal #{esc(d.node if d.node is not None else '—')}, call id <code>{esc(d.call_id)}</code>; "
        f"latency {esc(f'{d.latency_us:.1f} µs' if d.latency_us is not None else '—')}"
        f"{f'; artifact <code>{esc(d.artifact)}</code>' if d.artifact else ''}</p>",
        f'<p>Arguments: <code class="args">{esc(compact_json(d.args))}</code></p>',
        _evidence(view, d),
        _features(d),
    ]
    if d.safecommit is not None:
        parts.append(f"<h5>SafeCommit</h5>{render_safecommit(d.safecommit)}")
    if d.probes:
        parts.append(f"<p>Probes requested: {render_value(list(d.probes))}</p>")
    if d.error:
        parts.append(f'<p class="error">Error: <code>{esc(d.error)}</code></p>')
    parts.append("</div>")
    return "".join(parts)


def _score_bar(d: DecisionView) -> str:
    if d.score is None:
        return '<p class="muted">Refused before scoring.</p>'
    finite_t = d.threshold if d.threshold is not None and math.isfinite(d.threshold) else None
    top = max(1.0, d.score, finite_t or 0.0) * 1.05
    cmp = ">" if d.threshold is not None and d.score > d.threshold else "≤"
    marker = (
        f'<span class="bar-lambda" style="left:{finite_t / top * 100:.1f}%"></span>' if finite_t is not None else ""
    )
    fill = "over" if cmp == ">" else "under"
    return (
        f'<div class="scorebar" title="score {esc(number(d.score))}"><span class="bar-fill {fill}" '
        f'style="width:{max(d.score, 0.0) / top * 100:.1f}%"></span>{marker}</div>'
        f'<p class="score-line">score <strong>{esc(number(d.score))}</strong> {cmp} λ̂ {esc(number(d.threshold))}</p>'
    )


def _refs(indices: Sequence[int]) -> str:
    return ", ".join(f"#{i}" for i in indices) or "none"


def _evidence(view: EpisodeView, d: DecisionView) -> str:
    if d.node is None:
        return ""
    records = {r.index: r for r in view.records}
    private = [i for i in d.selected if i in records and records[i].private]
    scope = "" if view.complete else " as far as the audit log shows it (the selection; provenance_path fired)"
    path = (
        f'<p class="path">Private-source → sink path{scope}: nodes {_refs(d.path_nodes)} '
        f"({len(d.path_edges)} edges, drawn in red).</p>"
        if d.path_nodes
        else "<p>No private-source → sink path into this proposal.</p>"
    )
    edges = ", ".join(f"#{s} ({esc(t)})" for s, t in d.edges_in) or "none"
    chips = "".join(_chip(records[i]) for i in d.selected if i in records and records[i].kind != UNKNOWN)
    return (
        f'<p class="selection">Selected evidence: <strong>{len(d.selected)}</strong> of {d.full_prefix} earlier '
        f"records (full prefix): {_refs(d.selected)}"
        f"{f'; private sources among them: {_refs(private)}' if private else ''}.</p>"
        f"{f'<ul class=chips>{chips}</ul>' if chips else ''}{path}<p>Edges into the proposal: {edges}</p>"
    )


def _chip(record: RecordView) -> str:
    tool = f" <code>{esc(record.tool)}</code>" if record.tool else ""
    return f"<li>#{record.index} {esc(record.kind)}{tool}{_tags(record)}</li>"


def _tags(record: RecordView) -> str:
    flags = (("private", record.private), ("untrusted", record.untrusted), ("sink", record.sink))
    return "".join(f' <span class="tag tag-{c}">{c}</span>' for c, on in flags if on)


def _features(d: DecisionView) -> str:
    if not d.features:
        return ""
    rows = "".join(
        f'<tr class="{"on" if f.value else "off"}"><td><code>{esc(f.name)}</code></td>'
        f"<td>{'✓ 1' if f.value else '✗ 0'}</td><td>{esc(number(f.weight))}</td>"
        f"<td>{esc(number(f.contribution))}</td></tr>"
        for f in d.features
    )
    known = [f.contribution for f in d.features if f.contribution is not None]
    total = number(sum(known)) if len(known) == len(d.features) else "—"
    return (
        '<h5>Features</h5><table class="grid features"><thead><tr><th>feature</th><th>value</th><th>weight</th>'
        f"<th>contribution</th></tr></thead><tbody>{rows}</tbody><tfoot><tr><td>sum</td><td></td><td></td>"
        f"<td>{esc(total)}</td></tr><tr><td>score</td><td></td><td></td><td>{esc(number(d.score))}</td></tr>"
        "</tfoot></table>"
    )


# --------------------------------------------------------------------------- document


def document(
    title: str, views: Sequence[EpisodeView], *, notes: Sequence[str] = (), frontier: bytes | None = None
) -> str:
    """The whole self-contained HTML document."""
    sections = "".join(episode_section(v, k) for k, v in enumerate(views))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
        f"<header><h1>{esc(title)}</h1></header><main>"
        f"{overview(views, notes=notes, frontier=frontier)}{sections}</main>"
        f"<script>{SCRIPT}</script></body></html>\n"
    )
