"""Test doubles for LangChain users (needs ``pip install 'carbguard[langchain]'``).

:class:`ScriptedChatModel` answers turn ``k`` (the number of AI messages so far) with
``responses[k]`` and ignores the tools it is bound to, so an agent built with ``create_agent`` runs
offline and deterministically — the way this project's examples and tests drive real agents.

:class:`ReactiveChatModel` answers with whatever its ``respond`` callback returns for the messages
so far — tool results and the guard's refusals included — so a test can script a model that reacts
(e.g. apologizes and stops when the guard refuses a send).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

__all__ = ["ReactiveChatModel", "Reply", "ScriptedChatModel", "tool_call"]

Reply: TypeAlias = AIMessage | str | Sequence[Mapping[str, Any]]
"""What a :class:`ReactiveChatModel` callback returns: an ``AIMessage``, a final text, or tool calls
(:func:`tool_call` dicts; the message carrying them has empty text)."""


class ScriptedChatModel(FakeMessagesListChatModel):
    """A fake chat model that answers turn ``k`` with ``responses[k]`` (stateless, so reusable)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        """The script already names the tools."""
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        turn = sum(isinstance(m, AIMessage) for m in messages)
        reply = self.responses[min(turn, len(self.responses) - 1)].model_copy(update={"id": None})
        return ChatResult(generations=[ChatGeneration(message=reply)])


class ReactiveChatModel(BaseChatModel):
    """A fake chat model whose next message is ``respond(messages so far)`` (sync and async, stateless).

    ``respond`` sees every message the model is given — the human's, its own earlier turns, each
    ``ToolMessage`` (a refused call's is ``status="error"`` with the guard's reason) — and returns a
    :data:`Reply`.  Like :class:`ScriptedChatModel` it ignores the tools it is bound to.
    """

    respond: Callable[[Sequence[BaseMessage]], Reply]

    @property
    def _llm_type(self) -> str:
        return "carbguard-reactive"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ReactiveChatModel:
        """The callback already names the tools."""
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        reply = self.respond(tuple(messages))
        if isinstance(reply, AIMessage):
            message = reply.model_copy(update={"id": None})
        elif isinstance(reply, str):
            message = AIMessage(content=reply)
        else:
            calls = [dict(c) for c in reply if isinstance(c, Mapping)] if isinstance(reply, Sequence) else []
            if not isinstance(reply, Sequence) or len(calls) != len(reply):
                raise TypeError(
                    f"ReactiveChatModel: respond returned {reply!r}; want an AIMessage, a str or tool calls"
                )
            message = AIMessage(content="", tool_calls=calls)
        return ChatResult(generations=[ChatGeneration(message=message)])


def tool_call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    """A LangChain tool call dict."""
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}
