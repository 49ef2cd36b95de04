"""Generic defaults of a policy's scorer and graph, where they come from, and the load-time checks.

The defaults are written for a deployment nobody has calibrated yet: they must not depend on one
benchmark.  ``policy_warnings`` lists what a policy leaves switched off that the scorer needs to
see an attack (a zero weight, no patterns, no untrusted source); ``load_policy`` logs each one and
``carbguard policy validate`` prints them.

Where the defaults come from:

* **Weights** — the feature table's defaults (:mod:`guard.features`).  The shipped AgentDojo policies
  state every weight.
* **Injection patterns** — phrasings of published prompt-injection attacks, not of one benchmark:
  goal hijacking ("ignore the previous instructions", Perez & Ribeiro 2022, *Ignore Previous
  Prompt*), instructions addressed to the model and concealment from the user (Greshake et al.
  2023, *Not what you've signed up for*; OWASP Top 10 for LLM Applications, LLM01 Prompt
  Injection), and forged chat-template role markers.  AgentDojo's own markers (``<INFORMATION>``,
  "before you can solve the task") are not defaults: the AgentDojo policies list them.
* **Canary patterns** — fixed-format secrets that secret scanners (GitHub secret scanning,
  gitleaks) flag: cloud and platform API keys and tokens, PEM private keys, JSON Web Tokens.
  Personal data has no fixed format; name it per deployment.

Every pattern is anchored on a literal or bounded, so a long text without a match is scanned in
linear time.
"""

from __future__ import annotations

from typing import Any

from guard.features import CANARY, DEFAULT_WEIGHTS, OPT_IN_FEATURES, SIGNATURE_FEATURES, needing

DEFAULT_INJECTION_PATTERNS: tuple[str, ...] = (
    # goal hijacking: "ignore / disregard / forget (all) (the) previous instructions"
    r"(?i)\b(?:ignore|disregard|forget|override|skip)\b[^.\n]{0,40}?\b(?:previous|prior|above|earlier|preceding"
    r"|original|initial|all)\b[^.\n]{0,20}?\b(?:instructions?|prompts?|directions|directives|rules|tasks?)\b",
    # a new task handed over in data: "new instructions:", "updated task:"
    r"(?i)\b(?:new|updated|real|actual|additional)\s+(?:instructions?|tasks?|directives?|orders)\s*:",
    # text addressed to the model rather than to the reader
    r"(?i)\b(?:if you are|dear|attention|note to|message (?:for|to)|instructions? (?:for|to))\s+(?:an?\s+|the\s+)?"
    r"(?:ai|llm|language model|assistant|agent|chatbot|gpt|claude)\b",
    r"(?i)\b(?:ai|llm|assistant|agent|chatbot)s?\b[^.\n]{0,20}?\b(?:must|should|needs? to|has to|is required to)"
    r"\s+(?:now\s+)?(?:send|forward|transfer|delete|remove|pay|share|email|e-mail|post|upload|run|execute)\b",
    # concealment from the user
    r"(?i)\b(?:do not|don't|never)\s+(?:tell|inform|mention|alert|notify|show)\b[^.\n]{0,30}?\b(?:the\s+)?user\b",
    # forged role markers of chat templates
    r"(?i)<\|?\s*/?\s*(?:system|im_start|im_end|instructions?)\s*\|?>",
    r"\[/?(?:INST|SYS|SYSTEM)\]",
)

DEFAULT_CANARY_PATTERNS: tuple[str, ...] = (
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",  # AWS access key id
    r"\bgh[pousr]_[0-9A-Za-z]{36}\b",  # GitHub tokens
    r"\bgithub_pat_[0-9A-Za-z_]{80,}",  # GitHub fine-grained token
    r"\bxox[abposr]-[0-9A-Za-z-]{10,}",  # Slack tokens
    r"\b[rs]k_live_[0-9A-Za-z]{24,}",  # Stripe live keys
    r"\bAIza[0-9A-Za-z_-]{35}\b",  # Google API key
    r"\bsk-(?:proj-|svcacct-|ant-)?[0-9A-Za-z_-]{32,}",  # OpenAI / Anthropic API keys
    r"-----BEGIN (?:[A-Z]{2,10} )?PRIVATE KEY-----",  # PEM private keys
    r"\beyJ[0-9A-Za-z_-]{8,}\.eyJ[0-9A-Za-z_-]{8,}\.[0-9A-Za-z_-]{8,}",  # JSON Web Tokens
)


def policy_warnings(policy: Any) -> tuple[str, ...]:
    """What ``policy`` (a :class:`guard.policy.Policy`, which imports this module) leaves off, one line each."""
    out: list[str] = []
    weights = policy.scorer.weights.model_dump()
    for name, value in weights.items():
        if value == 0 and name in DEFAULT_WEIGHTS:  # the others are opt-in: off unless set
            out.append(f"scorer.weights.{name} is 0: the {name} feature never adds to a score")
    for name in SIGNATURE_FEATURES:
        if weights.get(name, 0) > 0:
            out.append(
                f"scorer.weights.{name} is above 0: the calibrated score reads attack wording (signature "
                "patterns), which a reworded attack removes; signatures act as a rule (scorer.signature_rule)"
            )
    if not policy.scorer.injection_patterns:
        out.append(f"scorer.injection_patterns is empty: the signature rule and {_and(SIGNATURE_FEATURES)} never fire")
    if not policy.scorer.canary_patterns:
        out.append(f"scorer.canary_patterns is empty: the {CANARY.name} feature never fires and no secret is redacted")
    kinds = {kind.value for spec in policy.tools.values() for kind in spec.source_kinds}
    if "untrusted_source" not in kinds:
        out.append(
            "no tool is an untrusted_source (kind or also_source): third-party text is trusted, so "
            f"{_and(needing('untrusted_source'))} never fire"
        )
    for name, spec in policy.tools.items():
        if spec.is_sink and not spec.payload_args and not spec.identifier_args:
            out.append(
                f"tools.{name} is a sink without payload_args or identifier_args: "
                f"{_and((*needing('payload_args'), 'payload canaries'))} cannot fire for it"
            )
    return tuple(out)


def _and(names: tuple[str, ...]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


__all__ = [
    "DEFAULT_CANARY_PATTERNS",
    "DEFAULT_INJECTION_PATTERNS",
    "DEFAULT_WEIGHTS",
    "OPT_IN_FEATURES",
    "policy_warnings",
]
