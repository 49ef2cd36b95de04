"""The policy's ``trust`` section: user-named values, allow-lists and internal destinations (read by
:mod:`guard.evidence.trust`)."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

from guard.policy.trusted_urls import dot_free, strict_url


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _plain_domains(value: tuple[str, ...]) -> tuple[str, ...]:
    for domain in value:
        if not re.fullmatch(r"(?:[A-Za-z0-9-]{1,63}\.)*[A-Za-z0-9-]{1,63}\.[A-Za-z]{2,63}\.?", domain):
            raise ValueError(f"domains: {domain!r} is not a domain name (like example.com)")
    return value


def _absolute_prefixes(value: tuple[str, ...]) -> tuple[str, ...]:
    for prefix in value:
        if not re.fullmatch(r"(?i)(?:https?|ftp)://[A-Za-z0-9.-]+(?::\d+)?(?:[/?#]\S*)?", prefix):
            raise ValueError(f"url_prefixes: {prefix!r} is not an absolute http(s) URL")
        url = strict_url(prefix)
        if url is None or not dot_free(url):
            raise ValueError(
                f"url_prefixes: {prefix!r} is not a URL every HTTP client reads the same way (no user-info, "
                "IP address, odd port, backslash, dot segment or bad percent-encoding)"
            )
    return value


class _Destinations(_Strict):
    """Destinations named by whole value, domain or URL prefix: what ``trust`` allows and ``trust.internal``
    keeps inside the deployment are matched by the same rules (:mod:`guard.evidence.trust`)."""

    recipients: tuple[str, ...] = Field(
        default=(),
        description="Recipients (e-mail addresses, account numbers, user names), matched as whole values, exactly "
        "(surrounding spaces and ASCII case aside).",
    )
    domains: tuple[str, ...] = Field(
        default=(),
        description="Domains: an e-mail address or URL whose domain or host is one of them, or a subdomain of "
        "one, matches (a URL only when every HTTP client reads its host the same way).",
    )
    url_prefixes: tuple[str, ...] = Field(
        default=(),
        description="URL prefixes (scheme and host, optionally a path): a URL at or under one, at a path-segment "
        "boundary and in every way a client or server may read its path, matches.",
    )

    @field_validator("domains")
    @classmethod
    def _domains(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _plain_domains(value)

    @field_validator("url_prefixes")
    @classmethod
    def _prefixes(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _absolute_prefixes(value)


class InternalSpec(_Destinations):
    """The deployment's own destinations (docs/policy.md#internal-destinations): private data sent to one of
    them is not a leak.  A sink call whose every destination, in any argument, is internal (matched exactly)
    leaves the private-data evidence out of its score; untrusted provenance and the action's own features
    still count.  Only the policy file can add a destination."""

    identifiers: tuple[str, ...] = Field(
        default=(),
        description="Internal identifiers (channels such as '#ops', accounts, queues), matched as whole values, "
        "exactly (ASCII case and surrounding spaces ignored; a look-alike is another identifier).",
    )

    @field_validator("identifiers")
    @classmethod
    def _identifiers(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for identifier in value:
            if not identifier.strip():
                raise ValueError("identifiers: an empty identifier names nothing")
        return value

    def declared(self) -> bool:
        """Whether the section names any destination."""
        return bool(self.recipients or self.domains or self.url_prefixes or self.identifiers)


class TrustSpec(_Destinations):
    """Trusted evidence (guard.evidence.trust): what may lower the score of a call whose every argument it
    names (the allow-lists ``recipients``, ``domains``, ``url_prefixes``, and values the user named)."""

    user_named: bool = Field(
        default=True,
        description="An argument value the user named in their own turn is trusted.",
    )
    internal: InternalSpec = Field(
        default_factory=InternalSpec,
        description=InternalSpec.__doc__,
    )
