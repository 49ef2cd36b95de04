"""HTML for values: any JSON-like value rendered generically, and the SafeCommit log (docs/safecommit.md).

Every string goes through :func:`html.escape`; nothing from a log or a tool result is ever
inserted as markup.  The SafeCommit renderer knows the fields of
:meth:`guard.safecommit.types.SafeCommitLog.to_dict` (retained worlds, safety classes with their
signatures, certificate, blocking worlds, probes) and renders every other key generically, so a
certifier that logs a different dict is still shown readably.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

MAX_DEPTH = 6
MAX_ITEMS = 200


def esc(value: Any) -> str:
    """Escaped text of any value (quotes included, safe in attributes too)."""
    return escape(str(value), quote=True)


def number(value: float | None, digits: int = 3) -> str:
    """A number for display: ``—`` for None, ``+∞``/``−∞`` for infinities."""
    if value is None:
        return "—"
    if math.isinf(value):
        return "+∞" if value > 0 else "−∞"
    return f"{value:.{digits}f}"


def compact_json(value: Any, limit: int = 600) -> str:
    """Compact JSON of ``value``, cut at ``limit`` characters (not escaped)."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _scalar(value: Any) -> str:
    if value is None:
        return '<span class="muted">null</span>'
    if isinstance(value, bool):
        return f'<span class="bool-{str(value).lower()}">{"✓ true" if value else "✗ false"}</span>'
    if isinstance(value, float):
        return esc(number(value, 4))
    return esc(value)


def render_value(value: Any, depth: int = 0) -> str:
    """Any JSON-like value as nested definition lists and tables."""
    if depth > MAX_DEPTH:
        return f"<code>{esc(compact_json(value, 300))}</code>"
    if isinstance(value, Mapping):
        if not value:
            return '<span class="muted">{}</span>'
        rows = "".join(
            f"<dt>{esc(k)}</dt><dd>{render_value(v, depth + 1)}</dd>" for k, v in list(value.items())[:MAX_ITEMS]
        )
        return f'<dl class="kv">{rows}</dl>'
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        items = list(value)[:MAX_ITEMS]
        if not items:
            return '<span class="muted">(none)</span>'
        if all(isinstance(i, Mapping) for i in items):
            return _table(items, depth)
        if all(not isinstance(i, Mapping | list | tuple) for i in items):
            return ", ".join(_scalar(i) for i in items)
        return "<ol>" + "".join(f"<li>{render_value(i, depth + 1)}</li>" for i in items) + "</ol>"
    return _scalar(value)


def _table(items: Sequence[Mapping[str, Any]], depth: int) -> str:
    keys: list[str] = []
    for item in items:
        keys.extend(str(k) for k in item if str(k) not in keys)
    head = "".join(f"<th>{esc(k)}</th>" for k in keys)
    body = "".join(
        "<tr>" + "".join(f"<td>{render_value(item.get(k), depth + 1)}</td>" for k in keys) + "</tr>" for item in items
    )
    return f'<table class="grid"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


# --------------------------------------------------------------------------- SafeCommit

_KNOWN = {
    "verdict",
    "reason",
    "kappa",
    "actions",
    "worlds",
    "retained",
    "excluded_by_score",
    "removed_by_probes",
    "classes",
    "certified",
    "chosen_action",
    "blocking",
    "probes_run",
    "budget",
    "probes_used",
    "probe",
    "expected_shrinkage",
    "probe_value",
    "probe_stop",
}


def _names(value: Any) -> list[str]:
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [str(v) for v in value]
    return []


def _worlds_table(log: Mapping[str, Any]) -> str:
    worlds = _names(log.get("worlds"))
    if not worlds:
        return ""
    retained = set(_names(log.get("retained")))
    by_score = set(_names(log.get("excluded_by_score")))
    by_probe = set(_names(log.get("removed_by_probes")))
    blocking = log.get("blocking")
    blockers = {w for ws in blocking.values() for w in _names(ws)} if isinstance(blocking, Mapping) else set()
    rows = []
    for world in worlds:
        if world in retained:
            status = '<span class="pill pill-ok">retained</span>'
        elif world in by_probe:
            status = '<span class="pill pill-muted">removed by a probe</span>'
        elif world in by_score:
            status = '<span class="pill pill-muted">excluded (score &gt; κ)</span>'
        else:
            status = '<span class="pill pill-muted">not retained</span>'
        block = '<span class="pill pill-bad">blocking</span>' if world in blockers else ""
        rows.append(f"<tr><td><code>{esc(world)}</code></td><td>{status} {block}</td></tr>")
    return (
        '<h5>Worlds</h5><table class="grid"><thead><tr><th>world</th><th>status</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _classes_table(log: Mapping[str, Any]) -> str:
    classes = log.get("classes")
    if not isinstance(classes, Sequence) or not classes or not all(isinstance(c, Mapping) for c in classes):
        return ""
    actions = _names(log.get("actions"))
    for item in classes:
        signature = item.get("signature")
        if isinstance(signature, Mapping):
            actions.extend(str(a) for a in signature if str(a) not in actions)
    head = "".join(f"<th>Γ ∋ <code>{esc(a)}</code></th>" for a in actions)
    rows = []
    for item in classes:
        signature = item.get("signature")
        sig = signature if isinstance(signature, Mapping) else dict(zip(actions, _names(signature), strict=False))
        cells = "".join(f"<td>{_scalar(sig.get(a))}</td>" for a in actions)
        weight = item.get("weight")
        rows.append(
            f"<tr><td>{render_value(item.get('worlds'))}</td>{cells}"
            f"<td>{esc(number(float(weight), 3)) if isinstance(weight, int | float) else '—'}</td></tr>"
        )
    return (
        '<h5>Retained safety classes (signatures)</h5><table class="grid"><thead><tr><th>worlds</th>'
        f"{head}<th>weight</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _certificate(log: Mapping[str, Any]) -> str:
    parts = []
    if "certified" in log or "chosen_action" in log:
        parts.append(
            f"<p>Certified actions: {render_value(log.get('certified'))}; "
            f"chosen: {_scalar(log.get('chosen_action'))}</p>"
        )
    blocking = log.get("blocking")
    if isinstance(blocking, Mapping) and blocking:
        items = "".join(
            f"<li><code>{esc(a)}</code> is blocked by {render_value(ws)}</li>" for a, ws in blocking.items()
        )
        parts.append(f"<h5>Blocking worlds</h5><ul>{items}</ul>")
    return "".join(parts)


def _probes(log: Mapping[str, Any]) -> str:
    parts = []
    if log.get("probe") is not None:
        parts.append(
            f"<p>Probe chosen: <code>{esc(log['probe'])}</code>, expected shrinkage "
            f"{_scalar(log.get('expected_shrinkage'))}, value per cost {_scalar(log.get('probe_value'))}</p>"
        )
    if log.get("probe_stop"):
        parts.append(f"<p>No probe: {esc(log['probe_stop'])}</p>")
    runs = log.get("probes_run")
    if isinstance(runs, Sequence) and runs:
        parts.append(f"<h5>Probes run and their outcomes</h5>{render_value(runs)}")
    if "budget" in log:
        parts.append(
            f'<p class="muted">probe budget {esc(log.get("budget"))}, used {esc(log.get("probes_used", 0))}</p>'
        )
    return "".join(parts)


def render_safecommit(raw: Mapping[str, Any]) -> str:
    """The SafeCommit log of one decision: worlds, signatures, certificate, blocking worlds, probes."""
    outer = dict(raw)
    inner = outer.pop("log", None)
    log: Mapping[str, Any] = inner if isinstance(inner, Mapping) else raw
    if not isinstance(inner, Mapping):
        outer = {}
    head = (
        f"<p>SafeCommit verdict <strong>{esc(log.get('verdict', outer.get('verdict', '—')))}</strong>, "
        f"reason <code>{esc(log.get('reason', '—'))}</code>, κ = {esc(log.get('kappa', '—'))}</p>"
    )
    body = _worlds_table(log) + _classes_table(log) + _certificate(log) + _probes(log)
    rest = {k: v for k, v in log.items() if k not in _KNOWN}
    rest.update({f"({k})": v for k, v in outer.items() if k != "verdict" and v is not None})
    extra = f"<h5>Other fields</h5>{render_value(rest)}" if rest else ""
    return f'<div class="safecommit">{head}{body}{extra}</div>'
