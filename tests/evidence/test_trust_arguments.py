"""Trust lowers a call only when every argument value is trusted, not only the listed ones.

The prefix graph makes edges from every argument of a proposal, so a private value in an argument the
policy did not list as ``payload_args`` or ``identifier_args`` (a reply-to, a label, a nested field,
an object key) is evidence of a flow; if the listed arguments are user-named, the call must still not
be lowered (docs/evidence.md#trusted-evidence-may-lower-a-score).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guard import Guard, Policy, Verdict
from guard.evidence.trust import trusted_call
from guard.policy import parse_policy
from guard.records import Record, proposal

TOOLS = {
    "read_vault": {"kind": "private_source", "identifier_args": ["entry"]},
    "post_note": {
        "kind": "sink",
        "effect": "irreversible",
        "severity": 3,
        "payload_args": ["text"],
        "identifier_args": ["channel"],
    },
}
SECRET = "vault entry: locker code 7731-QX-5528 for the Lisbon office"
CODE = "7731-QX-5528"
USER = "Post 'standup moved to noon' to #ops-lisbon please"
NAMED = {"channel": "#ops-lisbon", "text": "standup moved to noon"}


def _policy(**trust: Any) -> Policy:
    return parse_policy({"name": "args", "tools": TOOLS, **({"trust": trust} if trust else {})})


def _decide(args: dict[str, Any]) -> tuple[Verdict, float | None]:
    session = Guard(_policy(), threshold=0.5).session("s")
    session.observe_user(USER)
    session.decide("read_vault", {"entry": "lisbon"}, "c1")
    session.observe_result("c1", SECRET)
    decision = session.decide("post_note", args, "c2")
    return decision.verdict, decision.score


def test_a_private_value_in_an_unlisted_argument_keeps_the_score() -> None:
    """Catches trust that checks only payload_args/identifier_args: the listed arguments are user-named and
    the private code rides in an argument the policy did not list, so the call was lowered and executed."""
    assert _decide(NAMED)[0] is Verdict.EXECUTE  # control: every argument named, lowered
    verdict, score = _decide({**NAMED, "reply_to": CODE})
    assert verdict is Verdict.ESCALATE and score is not None and score > 0.5


def _place(value: str, path: list[str | int]) -> Any:
    """``value`` nested along ``path``: a key for a dict, an index for a list."""
    out: Any = value
    for step in reversed(path):
        out = {step: out} if isinstance(step, str) else [*["fine"] * step, out]
    return out


steps = st.lists(st.one_of(st.sampled_from(["meta", "cc", "x", "labels"]), st.integers(0, 2)), max_size=3)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(["reply_to", "meta", "channel", "text", "zz", "attachments"]),
    path=steps,
    leaf=st.sampled_from([CODE, f"see {CODE}", "7731", 7731, 5528.0]),
)
def test_any_untrusted_value_in_any_position_blocks_lowering(name: str, path: list[str | int], leaf: Any) -> None:
    """Catches trust that skips any argument position: an untrusted value at the top level of an unlisted
    argument, nested in an object or a list, or as a number, makes the call untrusted."""
    args: dict[str, Any] = {**NAMED, name: _place(leaf, path)} if name not in NAMED else dict(NAMED)
    if name in NAMED:
        args[name] = [NAMED[name], _place(leaf, path)]
    assert not trusted_call(_policy(), [USER], proposal(3, "post_note", args, "c"))


@settings(max_examples=40, deadline=None)
@given(extra=st.dictionaries(st.sampled_from(["a", "b", "cc"]), st.sampled_from(["", " ", "noon", "#ops-lisbon"])))
def test_named_or_blank_values_in_any_argument_keep_the_call_trusted(extra: dict[str, str]) -> None:
    """Catches trust that refuses everything once an unlisted argument exists: values the user named (or blank
    ones, which carry nothing) in other arguments leave the call trusted."""
    assert trusted_call(_policy(), [USER], proposal(3, "post_note", {**NAMED, **extra}, "c"))


def test_allow_lists_cover_every_argument_too() -> None:
    """Catches allow-list trust that ignores unlisted arguments: the listed recipient is allowed, a private
    value in another argument is not, so the call is not trusted."""
    policy = _policy(user_named=False, recipients=["#ops-lisbon", "standup moved to noon"])
    assert trusted_call(policy, [], proposal(3, "post_note", NAMED, "c"))
    assert not trusted_call(policy, [], proposal(3, "post_note", {**NAMED, "footer": CODE}, "c"))


def test_a_call_with_only_blank_listed_arguments_is_not_trusted() -> None:
    """Catches a vacuous 'every argument is trusted' when the listed arguments are blank and others are named."""
    assert not trusted_call(_policy(), [USER], proposal(3, "post_note", {"text": " ", "topic": "noon"}, "c"))


class _KeyedRecord:
    """A proposal whose :meth:`arg_values` also yields object keys (as ``Record.arg_values`` may)."""

    def __init__(self, record: Record, keys: list[str]) -> None:
        self._record, self._keys = record, keys
        self.kind, self.tool = record.kind, record.tool

    def arg_values(self) -> Iterator[tuple[str, str]]:
        yield from self._record.arg_values()
        yield from (("meta", key) for key in self._keys)


def test_every_string_arg_values_yields_is_checked() -> None:
    """Catches trust that reads argument values its own way instead of from ``Record.arg_values``: once that
    method yields object keys, a private value used as a key makes the call untrusted."""
    base = proposal(3, "post_note", {**NAMED, "meta": {"x": "x"}}, "c")
    keyed: Any = _KeyedRecord(base, [CODE])
    assert not trusted_call(_policy(), [USER + " x"], keyed)
    assert trusted_call(_policy(), [USER + " x"], _KeyedRecord(base, ["noon"]))  # type: ignore[arg-type]
