"""FakeLlm: a scripted stand-in for LlmClient, for offline tests of agents and tools.

It has the client's interface, ``generate(request, on_text=None) -> LlmResponse``, and:

- replies from a script: a list of replies, or a function of the request;
- records every request in ``requests``, so a test can assert on what the model was shown;
- fails loudly (``FakeLlmScriptError``) when called past the end of its script;
- checks the conversation as a real server does, and answers a broken one the way a
  server answers it, with an HTTP 400 ``error_message``: a tool result with no matching
  tool call, a tool call left without a result, a system message after the conversation
  has begun;
- streams: with ``on_text`` it hands the reply's text over in word-sized pieces.

A reply in the script is a string (assistant text), a ``ToolCall``, a list of those (and of
``Message`` objects), or a whole ``LlmResponse`` (to script failures, usage or truncation).
``FakeLlm.replaying(conversation)`` scripts the model's side of a saved conversation.

Needs ``messages``, and the request/response types of ``llm_client``.

>>> fake = FakeLlm([ToolCall("call_1", "add", {"a": 2, "b": 3}), "It is 5."])
>>> conversation = [Message("system", "Be brief."), Message("user", "2 + 3?")]
>>> fake.generate(LlmRequest(contents=conversation)).tool_calls
[ToolCall(tool_call_id='call_1', name='add', arguments={'a': 2, 'b': 3}, raw_arguments=None)]
>>> conversation += [ToolCall("call_1", "add", {"a": 2, "b": 3}), ToolResult("call_1", "add", "5")]
>>> fake.generate(LlmRequest(contents=conversation)).text
'It is 5.'
>>> len(fake.requests)
2
"""

import re
from collections.abc import Callable

from llm_client import LlmRequest, LlmResponse
from messages import AnyMessage, Message, ToolCall, ToolResult, model_replies

Reply = str | ToolCall | Message | list | LlmResponse


class FakeLlmScriptError(RuntimeError):
    """The fake was called more times than its script has replies."""


class FakeLlm:
    """A scripted model with the ``LlmClient.generate`` interface; see the module docstring."""

    def __init__(self, script: list | Callable[[LlmRequest], Reply]) -> None:
        self.script = script
        self.requests: list[LlmRequest] = []
        self.replies_given = 0  # a rejected request uses up no scripted reply

    @classmethod
    def replaying(cls, conversation: list) -> "FakeLlm":
        """Return a fake whose script is the assistant replies of a saved conversation, in order."""
        return cls(model_replies(conversation))

    def generate(self, request: LlmRequest, on_text: Callable[[str], None] | None = None) -> LlmResponse:
        """Record the request and return the next scripted reply (streamed to ``on_text``)."""
        self.requests.append(request)
        problem = conversation_error(request.contents)
        if problem:
            return LlmResponse(error_message=f"HTTP 400: {problem}", status_code=400)
        response = as_response(self._next_reply(request))
        if on_text is not None:
            for piece in re.findall(r"\s*\S+\s*", response.text):
                on_text(piece)
        return response

    def _next_reply(self, request: LlmRequest) -> Reply:
        if callable(self.script):
            return self.script(request)
        if self.replies_given == len(self.script):
            last = request.contents[-1] if request.contents else None
            raise FakeLlmScriptError(
                f"FakeLlm was called {len(self.requests)} times but its script has only {len(self.script)} "
                f"replies; the last message it was shown: {last!r}"
            )
        self.replies_given += 1
        return self.script[self.replies_given - 1]


def as_response(reply: Reply) -> LlmResponse:
    """Turn a scripted reply into the ``LlmResponse`` a client would have returned."""
    if isinstance(reply, LlmResponse):
        return reply
    items = reply if isinstance(reply, list) else [reply]
    content: list[AnyMessage] = [Message("assistant", item) if isinstance(item, str) else item for item in items]
    has_calls = any(isinstance(item, ToolCall) for item in content)
    return LlmResponse(content=content, finish_reason="tool_calls" if has_calls else "stop")


def conversation_error(contents: list) -> str | None:
    """Return what an OpenAI-compatible server would reject in this conversation, or ``None``.

    Tool results must answer a tool call of the assistant reply just before them, every
    tool call must be answered before the conversation goes on, and system messages come
    first (several chat templates, e.g. in vLLM and llama.cpp, reject one later on).
    """
    waiting: dict[str, int] = {}  # tool_call_id -> position of the unanswered call
    begun = False
    for position, message in enumerate(contents):
        if isinstance(message, ToolCall):
            if waiting and isinstance(contents[position - 1], ToolResult):
                return _unanswered(waiting, position)
            if message.tool_call_id in waiting:
                return f"messages[{position}]: duplicate tool call id {message.tool_call_id!r}"
            waiting[message.tool_call_id] = position
        elif isinstance(message, ToolResult):
            if waiting.pop(message.tool_call_id, None) is None:
                return (
                    f"messages[{position}]: tool result for {message.tool_call_id!r} does not answer "
                    "a tool call of the preceding assistant message"
                )
        elif waiting:
            return _unanswered(waiting, position)
        elif message.role == "system" and begun:
            return f"messages[{position}]: a system message must come before the conversation begins"
        begun = begun or not (isinstance(message, Message) and message.role == "system")
    return _unanswered(waiting, len(contents)) if waiting else None


def _unanswered(waiting: dict[str, int], position: int) -> str:
    ids = ", ".join(repr(tool_call_id) for tool_call_id in waiting)
    return (
        f"messages[{position}]: tool calls {ids} have no tool result; "
        "each tool call needs one before the conversation goes on"
    )
