"""A scripted model for the OpenAI Agents SDK (needs ``pip install 'carbguard[openai-agents]'``).

:class:`ScriptedModel` implements the SDK's :class:`agents.models.interface.Model`: turn ``k`` of a
run (the number of scripted turns already in the model's input) answers with ``turns[k]`` — a list
of output items (:func:`function_call`, :func:`message`) or a plain string (a final message).  It
ignores the tools it is offered, so an ``Agent`` with the real ``Runner`` runs offline and
deterministically, the way this project's tests and examples drive agents.  It keeps the inputs it
was called with (``inputs``) so a test can read what the model was told (e.g. a refusal).  It
streams too (``Runner.run_streamed``): a turn is one ``response.completed`` event.  A turn's items
carry ids naming the turn; the model finds them also inside text that quotes them (a handoff's
nested history summary), so a rewritten history does not restart the script.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any

from agents.items import ModelResponse, TResponseInputItem, TResponseOutputItem, TResponseStreamEvent
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

__all__ = ["ScriptedModel", "function_call", "message"]

_ID = re.compile(r"carbguard-scripted-(\d+)-\d+")
Turn = Sequence[TResponseOutputItem] | str


def function_call(name: str, args: dict[str, Any] | str, call_id: str) -> ResponseFunctionToolCall:
    """A function-tool call the model makes (``args`` as a dict, or raw argument text)."""
    text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return ResponseFunctionToolCall(type="function_call", name=name, arguments=text, call_id=call_id, id=call_id)


def message(text: str) -> ResponseOutputMessage:
    """An assistant message (a turn of only messages ends the run)."""
    part = ResponseOutputText(type="output_text", text=text, annotations=[])
    return ResponseOutputMessage(type="message", role="assistant", status="completed", content=[part], id="msg")


class ScriptedModel(Model):
    """Answers turn ``k`` with ``turns[k]`` (the last turn repeats); stateless across runs."""

    def __init__(self, turns: Sequence[Turn]) -> None:
        if not turns:
            raise ValueError("ScriptedModel needs at least one turn")
        self.turns = list(turns)
        self.inputs: list[list[Any]] = []

    def _turn(self, items: str | list[TResponseInputItem]) -> int:
        seen = -1
        for item in [] if isinstance(items, str) else items:
            text = json.dumps(item, default=str) if isinstance(item, dict) else str(item)
            for found in _ID.finditer(text):
                seen = max(seen, int(found.group(1)))
        return min(seen + 1, len(self.turns) - 1)

    def _output(self, turn: int) -> list[TResponseOutputItem]:
        script = self.turns[turn]
        items = [message(script)] if isinstance(script, str) else list(script)
        # ids mark which turn an item came from, so the next call knows where the run is
        return [item.model_copy(update={"id": f"carbguard-scripted-{turn}-{i}"}) for i, item in enumerate(items)]

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
        """The next scripted turn."""
        self.inputs.append([input] if isinstance(input, str) else list(input))
        return ModelResponse(output=self._output(self._turn(input)), usage=Usage(), response_id=None)

    async def stream_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> AsyncIterator[TResponseStreamEvent]:
        """The next scripted turn as one ``response.completed`` event."""
        self.inputs.append([input] if isinstance(input, str) else list(input))
        response = Response(
            id="carbguard-scripted",
            created_at=0,
            model="carbguard-scripted",
            object="response",
            output=self._output(self._turn(input)),
            tool_choice="auto",
            tools=[],
            top_p=None,
            parallel_tool_calls=False,
            status="completed",
        )
        yield ResponseCompletedEvent(type="response.completed", response=response, sequence_number=0)
