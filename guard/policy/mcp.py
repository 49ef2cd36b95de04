"""The ``mcp`` section of a policy: what the MCP proxy observes content outside ``tools/call`` as.

Resources (by URI) and prompts (by name) are declared with the source kind their content holds;
a read of an undeclared one is refused (``undeclared: refuse``, the default: the answer names the
policy's ``on_unknown``) or observed as ``private_source`` / ``untrusted_source`` — never as a
trusted kind.  Every other content the server sends (notifications, server requests, completions,
listings, answers the proxy cannot interpret) is observed as the ``messages`` kinds.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

McpSourceKind = Literal["private_source", "public_source", "untrusted_source"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class McpChannelSpec(_Strict):
    """One declared MCP channel: resources whose URI, or prompts whose name, matches ``match``."""

    match: str = Field(min_length=1, description="A glob (fnmatch, case-sensitive) or, with regex: true, a regex.")
    regex: bool = Field(default=False, description="Read match as a regular expression (full match).")
    kind: McpSourceKind = Field(description="What the channel's content holds (the source kind it is observed as).")

    @model_validator(mode="after")
    def _compiles(self) -> McpChannelSpec:
        if self.regex:
            try:
                re.compile(self.match)
            except re.error as exc:
                raise ValueError(f"match is not a valid regular expression: {exc}") from exc
        return self

    def matches(self, value: str) -> bool:
        """Whether ``value`` (a URI, URI template or prompt name) is this channel's."""
        if self.regex:
            return re.fullmatch(self.match, value) is not None
        return fnmatch.fnmatchcase(value, self.match)


class McpSpec(_Strict):
    """What the MCP proxy observes resources, prompts and other server content as."""

    resources: tuple[McpChannelSpec, ...] = Field(
        default=(),
        description="resources/read, resource listings, templates and updates: the first entry whose match "
        "fits the URI (or URI template) gives its kind.",
    )
    prompts: tuple[McpChannelSpec, ...] = Field(
        default=(), description="prompts/get and prompt listings: the first entry whose match fits the name."
    )
    undeclared: Literal["refuse", "private_source", "untrusted_source"] = Field(
        default="refuse",
        description="A resources/read or prompts/get of a URI or name no entry declares: refuse (answered "
        "with an error naming on_unknown; the server never sees it), or forward and observe as this kind.",
    )
    messages: tuple[Literal["private_source", "untrusted_source"], ...] = Field(
        default=("untrusted_source",),
        min_length=1,
        description="Kinds (one record each) of every other server content: notifications, server requests, "
        "completions, listings, initialize instructions, answers the proxy cannot interpret.",
    )
    server_requests: Literal["refuse", "observe"] = Field(
        default="refuse",
        description="sampling/createMessage, elicitation/create and any other server-to-client request but "
        "ping and roots/list: refuse (the server gets an error, the client never sees it), or observe as "
        "messages and forward (a sampling request with includeContext other than none is refused still; the "
        "client's answer is observed as messages before the server gets it, never as a user turn).",
    )

    @field_validator("messages")
    @classmethod
    def _unique(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value):
            raise ValueError("messages lists a kind twice")
        return value

    def resource_kind(self, uri: str) -> str | None:
        """The declared kind of the resource at ``uri`` (or of a URI template), None if undeclared."""
        return next((c.kind for c in self.resources if c.matches(uri)), None)

    def prompt_kind(self, name: str) -> str | None:
        """The declared kind of prompt ``name``, None if undeclared."""
        return next((c.kind for c in self.prompts if c.matches(name)), None)


__all__ = ["McpChannelSpec", "McpSpec"]
