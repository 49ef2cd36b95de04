"""The scorer's feature table: one row per binary feature, and everything derived from it.

A row names the feature, its group, its default weight, what it means, which evidence computes it, whether
trusted evidence may leave it out of a call's score (a data-flow feature), whether it is private-data evidence
that a call to an internal destination leaves out, and which policy settings it needs to fire.  The scorer's
feature order, the groups, the policy's weight fields and their defaults, the ablation variants, the
trust-lowered set, the load-time warnings and the reference tables of the docs are all read from here; no other
module spells a feature name.  Adding a feature is one row here plus the function that computes it, bound to the
row's name in :mod:`guard.scoring.rows` (docs/evidence.md#the-feature-table).  This module imports nothing from
the package, so the policy can read it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "CONJUNCTIONS",
    "CONTROL_FEATURES",
    "DATAFLOW",
    "DEFAULT_GROUP",
    "DEFAULT_WEIGHTS",
    "FEATURES",
    "FEATURE_GROUPS",
    "GRADED_FEATURES",
    "OPT_IN_FEATURES",
    "PRIVATE_DATA",
    "ROLE_FEATURES",
    "SIGNATURE_FEATURES",
    "SIGNATURE_GROUP",
    "SIGNATURE_RULE_FEATURES",
    "TABLE",
    "Feature",
    "needing",
]


@dataclass(frozen=True, slots=True)
class Feature:
    """One row of the table.  ``group``: ``default`` (on by default), ``prefix`` (opt-in, reads the whole prefix),
    ``roles`` or ``graded`` (opt-in, :mod:`guard.evidence.role_features`), ``control`` (control arguments and
    conjunctions, :mod:`guard.evidence.control`, some weigh by default).  ``evidence`` names, the function that computes
    it (:mod:`guard.scoring.rows` binds the row's name to it, and refuses a table whose rows and functions differ).
    ``dataflow``: a fully trusted call leaves the feature out of its score (:mod:`guard.evidence.trust`). ``needs``: the
    policy settings without which it never fires (``injection_patterns``, ``canary_patterns``, ``untrusted_source``,
    ``payload_args``).  ``private``: evidence that private data is in the call (provenance from a private source, a
    canary); a sink call whose every destination is internal (``trust.internal``) leaves it out of its score.
    ``all_of``: a conjunction, on when every row named there is on (computed from them)."""

    name: str
    group: str
    weight: float
    description: str
    evidence: str
    dataflow: bool = False
    needs: frozenset[str] = frozenset()
    private: bool = False
    all_of: tuple[str, ...] = ()


_ROWS = "guard.scoring.rows."


def _needs(*names: str) -> frozenset[str]:
    return frozenset(names)


PROVENANCE_PATH = Feature(
    "provenance_path",
    "default",
    0.52,
    "A sink proposal has a retained path from a private record in the selection.",
    f"{_ROWS}_provenance_path (selection and graph ancestors)",
    dataflow=True,
    private=True,
)
PRIVATE_IN_CONTEXT = Feature(
    "private_in_context",
    "default",
    0.10,
    "The selection holds a private record.",
    f"{_ROWS}_private_in_context (selection)",
    dataflow=True,
    private=True,
)
CANARY = Feature(
    "canary",
    "default",
    0.15,
    "A canary pattern matches a selected record or a payload argument of the proposal.",
    f"{_ROWS}_canary (guard.evidence.node_facts for records, payload arguments)",
    needs=_needs("canary_patterns"),
    private=True,
)
INJECTION_TEXT = Feature(
    "injection_text",
    "signature",
    0.0,
    "An injection (signature) pattern matches a selected record. Keyed on wording: weight 0 unless a deployment "
    "fits it on its own data.",
    f"{_ROWS}_injection_text (guard.evidence.node_facts: the injection flag of a record)",
    needs=_needs("injection_patterns"),
)
UNTRUSTED_PAYLOAD = Feature(
    "untrusted_payload",
    "default",
    0.20,
    "A payload/identifier argument carries a value from an untrusted record the user did not name.",
    f"{_ROWS}_untrusted_payload (edge rules)",
    dataflow=True,
    needs=_needs("untrusted_source", "payload_args"),
)
IRREVERSIBLE_SINK = Feature(
    "irreversible_sink",
    "default",
    0.08,
    "The proposal is an irreversible sink.",
    f"{_ROWS}_irreversible_sink (tool metadata)",
)
INJECTED_VALUE = Feature(
    "injected_value",
    "signature",
    0.0,
    "A payload value of the proposal stands inside injection-like text (a signature pattern's match) of an untrusted "
    "record in the selection. Keyed on wording: weight 0 unless a deployment fits it on its own data.",
    f"{_ROWS}_injected_value",
    dataflow=True,
    needs=_needs("injection_patterns", "untrusted_source", "payload_args"),
)
INJECTED_SHORT_ID = Feature(
    "injected_short_id",
    "signature",
    0.0,
    "A 1-12 character payload/identifier value of a sink or side-effectful call stands as a whole token inside "
    "injection-like text (a signature pattern's match) of an earlier untrusted record. Keyed on wording.",
    f"{_ROWS}_injected_short_id (guard.evidence.feature_index)",
    dataflow=True,
)
UNTRUSTED_ONLY_VALUE = Feature(
    "untrusted_only_value",
    "prefix",
    0.0,
    "A sink argument is reused from untrusted records only (no user turn, private or trusted record is also its "
    "source).",
    f"{_ROWS}_untrusted_only_value (edge rules)",
    dataflow=True,
)
PRIVATE_IN_URL = Feature(
    "private_in_url",
    "prefix",
    0.0,
    "A URL path or query in any argument carries a token of an earlier private record that no user turn contains.",
    f"{_ROWS}_private_in_url (guard.evidence.feature_index)",
    dataflow=True,
    private=True,
)
SEVERITY_HIGH = Feature(
    "severity_high", "prefix", 0.0, "The tool's declared severity is >= 2.", f"{_ROWS}_severity_high"
)
SEVERITY_MAX = Feature("severity_max", "prefix", 0.0, "The tool's declared severity is 3.", f"{_ROWS}_severity_max")

_ROLES = "guard.evidence.role_features.role_features (roles)"
_GRADED = "guard.evidence.role_features.role_features (graded)"
RECIPIENT_FROM_UNTRUSTED = Feature(
    "recipient_from_untrusted",
    "default",
    0.2,
    "An identifier argument reuses a value of an earlier untrusted record.",
    _ROLES,
    dataflow=True,
)
RECIPIENT_FROM_PRIVATE = Feature(
    "recipient_from_private",
    "roles",
    0.0,
    "An identifier argument reuses a value of an earlier private record.",
    _ROLES,
    dataflow=True,
    private=True,
)
PAYLOAD_FROM_UNTRUSTED = Feature(
    "payload_from_untrusted",
    "roles",
    0.0,
    "A payload argument reuses a value of an earlier untrusted record.",
    _ROLES,
    dataflow=True,
)
PAYLOAD_FROM_PRIVATE = Feature(
    "payload_from_private",
    "roles",
    0.0,
    "A payload argument reuses a value of an earlier private record.",
    _ROLES,
    dataflow=True,
    private=True,
)
PAYLOAD_PRIVATE_HALF = Feature(
    "payload_private_half",
    "graded",
    0.0,
    "At least half of the payload characters are traced to private records.",
    _GRADED,
    dataflow=True,
    private=True,
)
PAYLOAD_PRIVATE_MOST = Feature(
    "payload_private_most",
    "graded",
    0.0,
    "At least 4/5 of the payload characters are traced to private records.",
    _GRADED,
    dataflow=True,
    private=True,
)
PAYLOAD_UNTRUSTED_HALF = Feature(
    "payload_untrusted_half",
    "graded",
    0.0,
    "At least half of the payload characters are traced to untrusted records.",
    _GRADED,
    dataflow=True,
)
PAYLOAD_UNTRUSTED_MOST = Feature(
    "payload_untrusted_most",
    "graded",
    0.0,
    "At least 4/5 of the payload characters are traced to untrusted records.",
    _GRADED,
    dataflow=True,
)
LONG_PRIVATE_SPAN = Feature(
    "long_private_span",
    "graded",
    0.0,
    "An argument holds a run of >= 32 characters traced to private records.",
    _GRADED,
    dataflow=True,
    private=True,
)
LONG_UNTRUSTED_SPAN = Feature(
    "long_untrusted_span",
    "graded",
    0.0,
    "An argument holds a run of >= 32 characters traced to untrusted records.",
    _GRADED,
    dataflow=True,
)
PRIVATE_VALUES_2 = Feature(
    "private_values_2",
    "graded",
    0.0,
    "The arguments carry at least two distinct value tokens of private records.",
    _GRADED,
    dataflow=True,
    private=True,
)
PRIVATE_RELAYED = Feature(
    "private_relayed",
    "graded",
    0.0,
    "An argument reuses a record that descends from a private one (two hops or more).",
    _GRADED,
    dataflow=True,
    private=True,
)

INSTRUCTED_VALUE = Feature(
    "instructed_value",
    "default",
    0.52,
    "A payload/identifier value of a sink or side-effectful call stands inside an instruction-shaped clause of an "
    "earlier untrusted record, and no user turn holds it (found by grammar, not by any attack's wording).",
    f"{_ROWS}_instructed_value (guard.evidence.instructions.InstructedValues)",
    dataflow=True,
    needs=_needs("untrusted_source", "payload_args"),
)
UNREQUESTED_ACTION = Feature(
    "unrequested_action",
    "default",
    0.2,
    "A sink or side-effectful call takes an action that no word of the user's turns asks for.",
    f"{_ROWS}_unrequested_action (guard.evidence.scope.requested)",
)

_CONTROL = "guard.evidence.control.control_view"
CONTROL_UNTRUSTED_ONLY = Feature(
    "control_untrusted_only",
    "control",
    0.0,
    "A control argument (identifier_args) of a sink or side-effectful call takes a value only third-party records "
    "supplied (no user turn, private or trusted record).",
    _CONTROL,
    dataflow=True,
)
CONTROL_UNNAMED_SOURCE = Feature(
    "control_unnamed_source",
    "control",
    0.4,
    "As control_untrusted_only, and no user turn names a record that supplied it (holds an argument of its call).",
    _CONTROL,
    dataflow=True,
)


def _conjunction(name: str, weight: float, *rows: Feature) -> Feature:
    """A row that fires when all of ``rows`` fire; data-flow or private evidence when any of them is."""
    return Feature(
        name,
        "control",
        weight,
        f"Conjunction: {' and '.join(r.name for r in rows)} (one weight on the pair, not two light ones).",
        "guard.scoring.rows.bind (conjunction of rows)",
        dataflow=any(r.dataflow for r in rows),
        needs=frozenset().union(*(r.needs for r in rows)),
        private=any(r.private for r in rows),
        all_of=tuple(r.name for r in rows),
    )


_PAIRS = (
    ("unrequested_control", 0.3, CONTROL_UNTRUSTED_ONLY, UNREQUESTED_ACTION),
    ("unrequested_unnamed", 0.0, CONTROL_UNNAMED_SOURCE, UNREQUESTED_ACTION),
    ("unrequested_severe", 0.6, UNREQUESTED_ACTION, SEVERITY_MAX),
    ("unrequested_recipient", 0.0, RECIPIENT_FROM_UNTRUSTED, UNREQUESTED_ACTION),
    ("unrequested_payload", 0.5, PAYLOAD_UNTRUSTED_MOST, UNREQUESTED_ACTION),
    ("severe_unnamed_control", 0.1, CONTROL_UNNAMED_SOURCE, SEVERITY_MAX),
)

#: The table, in the scorer's feature order.
TABLE: tuple[Feature, ...] = (
    PROVENANCE_PATH,
    PRIVATE_IN_CONTEXT,
    CANARY,
    INJECTION_TEXT,
    UNTRUSTED_PAYLOAD,
    IRREVERSIBLE_SINK,
    INJECTED_VALUE,
    INJECTED_SHORT_ID,
    UNTRUSTED_ONLY_VALUE,
    PRIVATE_IN_URL,
    SEVERITY_HIGH,
    SEVERITY_MAX,
    RECIPIENT_FROM_UNTRUSTED,
    RECIPIENT_FROM_PRIVATE,
    PAYLOAD_FROM_UNTRUSTED,
    PAYLOAD_FROM_PRIVATE,
    PAYLOAD_PRIVATE_HALF,
    PAYLOAD_PRIVATE_MOST,
    PAYLOAD_UNTRUSTED_HALF,
    PAYLOAD_UNTRUSTED_MOST,
    LONG_PRIVATE_SPAN,
    LONG_UNTRUSTED_SPAN,
    PRIVATE_VALUES_2,
    PRIVATE_RELAYED,
    INSTRUCTED_VALUE,
    UNREQUESTED_ACTION,
    CONTROL_UNTRUSTED_ONLY,
    CONTROL_UNNAMED_SOURCE,
    *(_conjunction(name, weight, *rows) for name, weight, *rows in _PAIRS),
)

#: The group of features that are on by default (their weights are the policy's defaults).
DEFAULT_GROUP = "default"
#: The features keyed on signature patterns (attack wording): off by default, a rule outside the score.
SIGNATURE_GROUP = "signature"


def _group(name: str) -> tuple[str, ...]:
    return tuple(row.name for row in TABLE if row.group == name)


#: Feature names in the scorer's order (the columns of a replay's feature matrix and of a fit).
FEATURES: tuple[str, ...] = tuple(row.name for row in TABLE)
#: The default weights: every feature of the default group (the others weigh 0 unless set).
DEFAULT_WEIGHTS: dict[str, float] = {row.name: row.weight for row in TABLE if row.group == DEFAULT_GROUP}
#: Opt-in groups, by name; what ``calibrate --ceiling --without`` and the ablation leave out.
FEATURE_GROUPS: dict[str, tuple[str, ...]] = {
    name: _group(name) for name in (SIGNATURE_GROUP, "prefix", "roles", "graded", "control")
}
#: Features keyed on signature patterns (known attack wording).
SIGNATURE_FEATURES: tuple[str, ...] = FEATURE_GROUPS[SIGNATURE_GROUP]
#: Evidence that is off unless a policy or a fitted artifact sets its weight (no warning at 0).
OPT_IN_FEATURES: tuple[str, ...] = FEATURE_GROUPS[SIGNATURE_GROUP] + FEATURE_GROUPS["prefix"]
ROLE_FEATURES: tuple[str, ...] = tuple(row.name for row in TABLE if row.evidence == _ROLES)
GRADED_FEATURES: tuple[str, ...] = tuple(row.name for row in TABLE if row.evidence == _GRADED)
#: The signature features that carry a call's own value: the signature rule escalates a call on which one fires.
SIGNATURE_RULE_FEATURES: tuple[str, ...] = (INJECTED_VALUE.name, INJECTED_SHORT_ID.name)
#: The conjunction rows, in the scorer's order (each fires when every row of its ``all_of`` fires).
CONJUNCTIONS: tuple[Feature, ...] = tuple(row for row in TABLE if row.all_of)
CONTROL_FEATURES: tuple[str, ...] = tuple(row.name for row in TABLE if row.evidence == _CONTROL)
#: The data-flow features: a fully trusted call leaves them out of its score.
DATAFLOW: frozenset[str] = frozenset(row.name for row in TABLE if row.dataflow)
PRIVATE_DATA: frozenset[str] = frozenset(row.name for row in TABLE if row.private)
"""Private-data evidence: what a call to an internal destination leaves out of its score (``trust.internal``)."""


def needing(setting: str, group: str = DEFAULT_GROUP) -> tuple[str, ...]:
    """The features of ``group`` that never fire without the policy setting ``setting``."""
    return tuple(row.name for row in TABLE if row.group == group and setting in row.needs)
