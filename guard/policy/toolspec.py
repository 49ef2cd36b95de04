"""The ``tools`` section's entries: a tool's kind (one or several), effect, severity and arguments (docs/policy.md)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["Effect", "ToolKind", "ToolSpec", "dumped_tools"]


class ToolKind(StrEnum):
    """What a tool's results hold, or what it does (docs/policy.md)."""

    PRIVATE_SOURCE = "private_source"
    PUBLIC_SOURCE = "public_source"
    UNTRUSTED_SOURCE = "untrusted_source"
    SINK = "sink"
    OTHER = "other"


class Effect(StrEnum):
    """Side effect of running a tool."""

    NONE = "none"
    REVERSIBLE = "reversible"
    IRREVERSIBLE = "irreversible"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


_SOURCE_KINDS = frozenset({"private_source", "public_source", "untrusted_source"})


class ToolSpec(_Strict):
    """Metadata of one tool."""

    kind: ToolKind | tuple[ToolKind, ...] = Field(
        description="What the tool's results hold, or what it does; a list when it is several at once "
        "(docs/policy.md#kind): e.g. [private_source, untrusted_source] for tickets that hold customer data and "
        "that customers write, or [sink, untrusted_source] for a fetch whose URL carries data out and whose "
        "page is third-party text."
    )
    effect: Effect = Field(default=Effect.NONE, description="Side effect of running it.")
    severity: int = Field(default=0, ge=0, le=3, description="0 (harmless) to 3 (severe).")
    payload_args: tuple[str, ...] = Field(default=(), description="Arguments whose values leave the system.")
    identifier_args: tuple[str, ...] = Field(default=(), description="Arguments that name an entity.")
    also_source: ToolKind | None = Field(
        default=None,
        description="For sinks whose results are also a source (the older spelling of kind: [sink, <source kind>]).",
    )
    owner: str | None = Field(
        default=None,
        min_length=1,
        description="On a private source whose results are records (a JSON object or a list of them): the field "
        "naming each record's owner's destination (an address, a phone, an account). A record's private data may "
        "go to a call whose every destination is that record's owner or internal (docs/policy.md#owners).",
    )
    trusted_fields: tuple[str, ...] = Field(
        default=(),
        description="On a source whose results are records: fields the system fills in (a ticket's customer, "
        "order id, form address), not the writer of the free text; their values are not untrusted and stay "
        "private on a private source (docs/policy.md#trusted-fields).",
    )
    description: str = Field(default="", description="Free text for people; the guard does not read it.")

    @field_validator("kind", mode="before")
    @classmethod
    def _kind_list(cls, value: Any) -> Any:
        items = value if isinstance(value, list | tuple) else [value]
        known = [k.value for k in ToolKind]
        for item in items:
            if not isinstance(item, ToolKind) and item not in known:
                raise ValueError(f"kind: {item!r} is not one of {', '.join(known)} (or a list of them)")
        if isinstance(value, list | tuple):
            if not value:
                raise ValueError("kind: an empty list; give one kind or a list of kinds")
            if len(value) == 1:
                return value[0]
            if len(set(map(str, value))) != len(value):
                raise ValueError(f"kind: {list(value)} lists a kind twice")
            kinds = {str(k) for k in value}
            if "other" in kinds:
                raise ValueError("kind: 'other' means neither source nor sink and cannot be combined with another kind")
            if "public_source" in kinds and kinds & {"private_source", "untrusted_source"}:
                raise ValueError(
                    f"kind: {list(value)} combines public_source (trusted, public text) with a private or untrusted "
                    "source kind; keep the private/untrusted ones"
                )
            return tuple(value)
        return value

    @model_validator(mode="after")
    def _check_also_source(self) -> ToolSpec:
        if self.also_source is not None:
            if self.kind is not ToolKind.SINK:
                raise ValueError(
                    "also_source is only allowed on tools with kind: sink (with a list kind, write every kind "
                    "in kind, e.g. kind: [sink, untrusted_source])"
                )
            if self.also_source in (ToolKind.SINK, ToolKind.OTHER):
                raise ValueError("also_source must be private_source, public_source or untrusted_source")
        return self

    @model_validator(mode="after")
    def _check_record_fields(self) -> ToolSpec:
        kinds = {str(k) for k in self.kinds}
        if self.owner is not None and "private_source" not in kinds:
            raise ValueError(
                f"owner: {self.owner!r} names whose data a result record is, which only a private_source's "
                "records have; add private_source to kind or drop owner"
            )
        if self.trusted_fields and not kinds & _SOURCE_KINDS:
            raise ValueError(
                "trusted_fields is only allowed on a source (a kind ending in _source): a sink's or "
                "other tool's results are not read as records"
            )
        for name in self.trusted_fields:
            if not name.strip():
                raise ValueError("trusted_fields: an empty field name names nothing")
        if len(set(self.trusted_fields)) != len(self.trusted_fields):
            raise ValueError(f"trusted_fields: {list(self.trusted_fields)} lists a field twice")
        return self

    @property
    def reads_records(self) -> bool:
        """Whether the tool's results are read record by record (it declares ``owner`` or ``trusted_fields``)."""
        return self.owner is not None or bool(self.trusted_fields)

    @property
    def kinds(self) -> frozenset[ToolKind]:
        """Every kind the tool has: its ``kind`` (one or a list) and its ``also_source``."""
        declared = self.kind if isinstance(self.kind, tuple) else (self.kind,)
        extra = (self.also_source,) if self.also_source is not None else ()
        return frozenset((*declared, *extra))

    @property
    def is_sink(self) -> bool:
        """Whether the tool is a sink (``sink`` is its kind or among its kinds)."""
        return ToolKind.SINK in self.kinds

    @property
    def source_kinds(self) -> frozenset[ToolKind]:
        """The source kinds that decide the trust of this tool's results (none: a sink or ``other`` only)."""
        return frozenset(k for k in self.kinds if k.value in _SOURCE_KINDS)

    @property
    def certified(self) -> bool:
        """Whether SafeCommit certifies this tool's calls: a side effect, or a sink whose arguments leave the
        system (a "read" whose URL or query carries data sends it, whatever its ``effect``)."""
        return self.effect is not Effect.NONE or (self.is_sink and bool(self.payload_args))

    @property
    def source_kind(self) -> ToolKind:
        """One kind for the trust of this tool's results: the source kind when there is one (untrusted before
        private before public when there are several), else the tool's first kind."""
        for kind in (ToolKind.UNTRUSTED_SOURCE, ToolKind.PRIVATE_SOURCE, ToolKind.PUBLIC_SOURCE):
            if kind in self.kinds:
                return kind
        return self.kind[0] if isinstance(self.kind, tuple) else self.kind


def dumped_tools(tools: dict[str, Any]) -> dict[str, Any]:
    """The ``tools`` of a policy's JSON dump with ``owner`` and ``trusted_fields`` left out where unset, so a
    fingerprint of a policy that declares neither is what it was before the options (artifacts stay valid)."""
    for entry in tools.values():
        for key, unset in (("owner", None), ("trusted_fields", [])):
            if entry.get(key, unset) == unset:
                entry.pop(key, None)
    return tools
