"""What adapters do at a run's edges: check the agent's tools at its start, close its session on an error."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator

from guard.policy import Policy
from guard.policy import tools as policy_tools
from guard.policy.tools import ToolSchema
from guard.runtime import Session

__all__ = ["check_tools", "closed_on_error"]


@contextlib.contextmanager
def closed_on_error(session: Session | None) -> Iterator[None]:
    """Close ``session`` (its ``session_end`` entry) when the block leaves through any exception, then re-raise.

    For ways out that skip the framework's end-of-run hook: an error, an interrupt, a pause for
    human review.  A session closed here that decides again continues as a new segment (docs/audit.md).
    """
    try:
        yield
    except BaseException:
        if session is not None:
            session.close()  # never raises
        raise


def check_tools(policy: Policy, schemas: Iterable[ToolSchema], report: Callable[[str], None]) -> list[str]:
    """At start: the agent's tools against the policy (unknown tools, argument names), each problem reported.

    Calls to tools the policy does not know are refused when they come (the policy's ``on_unknown``);
    this makes the mismatch visible before the first call.
    """
    problems = policy_tools.check_tools(policy, schemas, policy_extra=False)
    for problem in problems:
        report(f"carbguard: policy {policy.name!r} vs agent tools: {problem}")
    return problems
