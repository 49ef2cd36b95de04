"""Test doubles for LangChain users (needs ``pip install 'carbguard[langchain]'``).

:class:`ScriptedChatModel` answers turn ``k`` (the number of AI messages so far) with
``responses[k]`` and ignores the tools it is bound to, so an agent built with ``create_agent`` runs
offline and deterministically — the way this project's examples and tests drive real agents.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

__all__ = ["ScriptedChatModel", "tool_call"]


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


def tool_call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    """A LangChain tool call dict."""
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}
