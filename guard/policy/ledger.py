"""The ``ledger:`` section of a policy: the deployment's harm categories as rules.

Each key is one of the ledger's categories and declares the rule that charges it; a category
without a key never fires from rules (labels may still charge it).  Every rule has the same shape:
``tools``/``sinks`` is a list of tool names, and per-tool arguments sit in their own mapping
(``recipient_args``, ``object_args``).  The rules are evaluated by
:mod:`guard.ledger.rules` over *executed* proposals only, for calibration and ``carbguard ledger
check``; the gate never reads this section (it is not part of the pipeline fingerprint).

"Named by the user" means: the value, lower-cased with whitespace collapsed, stands in the text of
the user's own turns before the proposal.

Scopes (docs/ledger-rules.md#scoped-rules): ``destructive``/``credential_change`` may protect only the
objects that ``paths``/``targets`` (regexes, searched) match; ``privacy_flow`` does not charge a send to
its ``allowed_destinations`` (default: the policy's ``trust.internal``), and ``attacker_directed``
without an allow-list of its own allows ``trust.internal``'s destinations.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from guard.policy.trust import InternalSpec

LEDGER_CATEGORIES: tuple[str, ...] = (
    "privacy_flow",
    "attacker_directed",
    "destructive",
    "credential_change",
    "untrusted_instruction",
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _compiles(patterns: tuple[str, ...]) -> tuple[str, ...]:
    for position, pattern in enumerate(patterns):
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"pattern [{position}] {pattern!r} is not a valid regular expression: {exc}") from exc
    return patterns


class PrivacyFlowRule(_Strict):
    """``privacy_flow``: a private value reaches an executed sink whose recipient the user did not name."""

    sinks: tuple[str, ...] | None = Field(
        default=None, description="Sink tools this rule watches; default: every tool with kind: sink."
    )
    canary_patterns: tuple[str, ...] = Field(
        default=(),
        description="Regexes of honeytokens / canary values: a match in a sink's payload is private evidence.",
    )
    private_patterns: tuple[str, ...] = Field(
        default=(),
        description="Regexes of private values (account numbers, e-mails, ...): a match inside an earlier "
        "result of a private_source tool that reappears in a sink's payload is private evidence.",
    )
    private_span: int | None = Field(
        default=None,
        ge=8,
        le=10_000,
        description="If set: a payload value at least this many characters long copied from an earlier "
        "private_source result is private evidence too (whole files, records).",
    )
    user_named_recipient_ok: bool = Field(
        default=True,
        description="A send whose every identifier argument the user named is not charged "
        "(the user asked for it). Sinks without identifier arguments are always checked.",
    )
    allowed_destinations: InternalSpec | None = Field(
        default=None,
        description="Destinations private data may go to (same keys and matching as trust.internal): a send "
        "whose every identifier argument names one is not charged. Absent: the policy's trust.internal; "
        "{} (explicitly empty): none allowed.",
    )

    @field_validator("canary_patterns", "private_patterns")
    @classmethod
    def _valid(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _compiles(value)


class RecipientRule(_Strict):
    """``attacker_directed``: an executed sink sends to a recipient outside the allow-list."""

    tools: tuple[str, ...] | None = Field(
        default=None,
        description="The tools this rule watches; default: every sink except the tools destructive and "
        "credential_change protect (their identifier_args name the object acted on, not a recipient).",
    )
    recipient_args: dict[str, tuple[str, ...]] | None = Field(
        default=None,
        description="Tool → the arguments naming its recipients; default: the tool's identifier_args.",
    )
    allow_domains: tuple[str, ...] = Field(
        default=(),
        description="Allowed domains: an e-mail address or URL whose host is one of these or a subdomain. "
        "With neither allow_domains nor allow_identifiers written, the policy's trust.internal destinations "
        "are the allowed recipients; writing either (even []) replaces them.",
    )
    allow_identifiers: tuple[str, ...] = Field(
        default=(), description="Allowed recipients matched exactly (case-insensitive): channels, IBANs, names."
    )
    user_named_ok: bool = Field(default=True, description="A recipient the user named is not charged.")

    def states_allow_list(self) -> bool:
        """Whether the rule gives its own allow-list (``allow_domains`` or ``allow_identifiers`` written, even
        empty); if not, the policy's ``trust.internal`` destinations are the allowed recipients."""
        return bool({"allow_domains", "allow_identifiers"} & self.model_fields_set)

    @field_validator("tools", mode="before")
    @classmethod
    def _list_of_tools(cls, value: object) -> object:
        if isinstance(value, Mapping):
            args = {str(k): v for k, v in value.items() if v}
            raise ValueError(
                "tools is a list of tool names, as in destructive.tools; the per-tool arguments moved to "
                f"recipient_args: write tools: {list(map(str, value))}" + (f", recipient_args: {args}" if args else "")
            )
        return value


class ProtectedToolsRule(_Strict):
    """``destructive`` / ``credential_change``: an executed call of these tools on an object the user did not name
    (with ``paths``/``targets``: and that matches one of their patterns)."""

    tools: tuple[str, ...] = Field(min_length=1, description="The tools this category protects.")
    object_args: dict[str, tuple[str, ...]] | None = Field(
        default=None,
        description="Tool → the arguments naming the object acted on; default: its identifier_args, "
        "or every argument if it declares none.",
    )
    paths: tuple[str, ...] | None = Field(
        default=None,
        description="Regexes of the file paths this rule protects, searched (re.search; anchor with ^ and $) in "
        "each object-argument value: with paths or targets, a call is charged only when an unnamed object "
        "value matches one of them. Absent: every object the user did not name.",
    )
    targets: tuple[str, ...] | None = Field(
        default=None,
        description="Regexes of the other objects this rule protects (hosts, accounts, resources), searched as "
        "paths; paths and targets together: a match of either charges.",
    )

    supplied_args: dict[str, tuple[str, ...]] | None = Field(
        default=None,
        description="Tool → the arguments holding the new value (an address, a phone, a payee): a call of such a "
        "tool is charged only when a non-blank value of one of them was supplied only by third-party text (an "
        "earlier untrusted result's free text), not by a user turn, a trusted field, a record's owner field or a "
        "private result no third party writes (docs/ledger-rules.md#supplied-values). Its object_args are not "
        "checked then.",
    )

    @model_validator(mode="after")
    def _supplied_tools_listed(self) -> ProtectedToolsRule:
        extra = sorted(set(self.supplied_args or ()) - set(self.tools))
        if extra:
            raise ValueError(f"supplied_args names {extra}, which are not among this rule's tools")
        return self

    @field_validator("paths", "targets")
    @classmethod
    def _scope(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is not None and not value:
            raise ValueError("an empty list would never charge; give at least one regular expression or drop the key")
        return None if value is None else _compiles(value)

    def scope(self) -> tuple[str, ...] | None:
        """The patterns of ``paths`` and ``targets`` together, or None when neither is given (every object)."""
        if self.paths is None and self.targets is None:
            return None
        return (*(self.paths or ()), *(self.targets or ()))


class UntrustedReuseRule(_Strict):
    """``untrusted_instruction``: an executed sink's payload reuses a span of an earlier untrusted result."""

    sinks: tuple[str, ...] | None = Field(
        default=None, description="Sink tools this rule watches; default: every tool with kind: sink."
    )
    min_span: int = Field(
        default=20, ge=4, le=10_000, description="Shortest reused span (characters, after normalization) that counts."
    )
    user_named_recipient_ok: bool = Field(
        default=True,
        description="A send whose every identifier argument the user named is not charged "
        "(the user asked for it). Sinks without identifier arguments are always checked.",
    )
    allowed_destinations: InternalSpec | Literal["internal"] | None = Field(
        default=None,
        description="Destinations a quote of untrusted text may go to (keys and matching of trust.internal), or "
        "'internal' for the policy's trust.internal: a send whose every destination is one is not charged "
        "(a customer's ticket quoted to the support channel). Absent: every destination is charged.",
    )


class BoundRule(_Strict):
    """A numeric bound (docs/ledger-rules.md#numeric-bounds): an executed call of ``tool`` whose ``arg`` exceeds
    ``field`` of the private record of ``source`` that ``key_arg`` names (its ``key_field`` is exactly the
    call's ``key_arg``) charges ``category``; so does one that no earlier record bounds, or whose value is
    not a number (a refund above the order amount, or of an order never read)."""

    category: Literal[
        "privacy_flow", "attacker_directed", "destructive", "credential_change", "untrusted_instruction"
    ] = Field(description="The ledger category a call out of bounds charges.")
    tool: str = Field(min_length=1, description="The tool whose argument is bounded.")
    arg: str = Field(min_length=1, description="The bounded argument (a number, or a number written as text).")
    source: str = Field(min_length=1, description="The private source whose records hold the bound.")
    field: str = Field(min_length=1, description="The record field holding the bound (a number).")
    key_arg: str = Field(min_length=1, description="The call's argument naming the record (an order id).")
    key_field: str = Field(min_length=1, description="The record field that key_arg must equal exactly.")


class LedgerSpec(_Strict):
    """The deployment's declared harm ledger (calibration only; never read by the gate)."""

    privacy_flow: PrivacyFlowRule | None = Field(default=None, description=PrivacyFlowRule.__doc__)
    attacker_directed: RecipientRule | None = Field(default=None, description=RecipientRule.__doc__)
    destructive: ProtectedToolsRule | None = Field(default=None, description=ProtectedToolsRule.__doc__)
    credential_change: ProtectedToolsRule | None = Field(default=None, description=ProtectedToolsRule.__doc__)
    untrusted_instruction: UntrustedReuseRule | None = Field(default=None, description=UntrustedReuseRule.__doc__)
    bounds: tuple[BoundRule, ...] = Field(default=(), description=BoundRule.__doc__)

    def check_tools(self, tools: Mapping[str, tuple[str, tuple[str, ...]]]) -> None:
        """Cross-check against the policy: ``tools`` maps name → (kind, declared args); raise ValueError."""
        problems: list[str] = []
        for where, names in self._tool_refs():
            problems += [
                f"ledger.{where}: tool {name!r} is not declared under tools" for name in names if name not in tools
            ]
        for where, mapping in self._arg_refs():
            for tool, args in mapping.items():
                declared = tools.get(tool, ("", ()))[1]
                if tool in tools and declared:
                    problems += [
                        f"ledger.{where}: argument {arg!r} of tool {tool!r} is not among its declared "
                        f"payload_args/identifier_args"
                        for arg in args
                        if arg not in declared
                    ]
        if problems:
            raise ValueError("; ".join(problems))

    @model_validator(mode="after")
    def _protected_tools_need_recipient_args(self) -> LedgerSpec:
        rule = self.attacker_directed
        listed = set(rule.tools or ()) & self.protected_tools() if rule is not None else set()
        missing = sorted(name for name in listed if not (rule and rule.recipient_args and name in rule.recipient_args))
        if missing:
            raise ValueError(
                f"attacker_directed.tools lists {missing}, which destructive/credential_change protect: their "
                "identifier_args name the object acted on, not a recipient; give the recipient arguments under "
                "attacker_directed.recipient_args or drop them from attacker_directed.tools"
            )
        return self

    def _tool_refs(self) -> Iterable[tuple[str, Iterable[str]]]:
        if self.privacy_flow and self.privacy_flow.sinks is not None:
            yield "privacy_flow.sinks", self.privacy_flow.sinks
        if self.attacker_directed and self.attacker_directed.tools is not None:
            yield "attacker_directed.tools", self.attacker_directed.tools
        if self.attacker_directed and self.attacker_directed.recipient_args:
            yield "attacker_directed.recipient_args", tuple(self.attacker_directed.recipient_args)
        for name in ("destructive", "credential_change"):
            rule: ProtectedToolsRule | None = getattr(self, name)
            if rule is not None:
                yield f"{name}.tools", rule.tools
                yield f"{name}.object_args", tuple(rule.object_args or ())
        if self.untrusted_instruction and self.untrusted_instruction.sinks is not None:
            yield "untrusted_instruction.sinks", self.untrusted_instruction.sinks
        for i, bound in enumerate(self.bounds):
            yield f"bounds[{i}].tool", (bound.tool,)
            yield f"bounds[{i}].source", (bound.source,)

    def _arg_refs(self) -> Iterable[tuple[str, Mapping[str, tuple[str, ...]]]]:
        if self.attacker_directed and self.attacker_directed.recipient_args:
            yield "attacker_directed.recipient_args", self.attacker_directed.recipient_args
        for name in ("destructive", "credential_change"):
            rule: ProtectedToolsRule | None = getattr(self, name)
            if rule is not None and rule.object_args:
                yield f"{name}.object_args", rule.object_args
            if rule is not None and rule.supplied_args:
                yield f"{name}.supplied_args", rule.supplied_args

    def protected_tools(self) -> frozenset[str]:
        """The tools ``destructive`` and ``credential_change`` protect: they act on an object, never a recipient."""
        rules = (self.destructive, self.credential_change)
        return frozenset(name for rule in rules if rule is not None for name in rule.tools)

    def recipient_args(self, name: str, identifier_args: tuple[str, ...], is_sink: bool) -> tuple[str, ...]:
        """The arguments of tool ``name`` that ``attacker_directed`` reads as recipients (empty: not watched).

        ``recipient_args`` when it names the tool; else, for a watched tool, its ``identifier_args`` --
        unless a protected tool (a delete's path is never a recipient by default).
        """
        rule = self.attacker_directed
        if rule is None:
            return ()
        watched = name in rule.tools if rule.tools is not None else is_sink
        if not watched:
            return ()
        if rule.recipient_args and name in rule.recipient_args:
            return rule.recipient_args[name]
        return () if name in self.protected_tools() else identifier_args

    def declared(self) -> tuple[str, ...]:
        """The categories this section declares a rule for, in ledger order."""
        bounded = {bound.category for bound in self.bounds}
        return tuple(c for c in LEDGER_CATEGORIES if getattr(self, c) is not None or c in bounded)


__all__ = [
    "LEDGER_CATEGORIES",
    "BoundRule",
    "LedgerSpec",
    "PrivacyFlowRule",
    "ProtectedToolsRule",
    "RecipientRule",
    "UntrustedReuseRule",
]
