"""The five message kinds of an agent's conversation, as plain dataclasses.

A conversation is a list of these, oldest first:

- ``Message(role, content)``: a system, user or assistant text message;
- ``ToolCall``: one tool call the model asked for (an assistant reply may hold several);
- ``ToolResult``: a tool's answer to one ``ToolCall``, linked by ``tool_call_id``.

An assistant reply is the assistant ``Message`` (if the model wrote text) followed by its
``ToolCall`` objects; ``llm_client`` merges them into one wire message.

Every message turns into a JSON-ready dict and back without loss, so a conversation can be
saved as JSON Lines and loaded again. Needs only the standard library.

>>> call = ToolCall("call_1", "add", {"a": 2, "b": 3})
>>> message_from_dict(call.to_dict()) == call
True
>>> call.to_dict()
{'type': 'tool_call', 'tool_call_id': 'call_1', 'name': 'add', 'arguments': {'a': 2, 'b': 3}}
>>> ToolCall.from_arguments_text("call_2", "add", '{"a": 2').raw_arguments
'{"a": 2'
"""

import json
from dataclasses import dataclass, field
from typing import Any, Union

ROLES = ("system", "user", "assistant")


@dataclass
class Message:
    """A text message from the system prompt, the user or the assistant."""

    role: str
    content: str

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"Message role must be one of {', '.join(ROLES)}; got {self.role!r}")

    def to_dict(self) -> dict:
        """Return the JSON-ready form: ``{"type": "message", "role": ..., "content": ...}``."""
        return {"type": "message", "role": self.role, "content": self.content}

    @classmethod
    def from_dict(cls, data: dict) -> "Message":
        """Rebuild a message from ``to_dict`` output."""
        return cls(role=data["role"], content=data["content"])


@dataclass
class ToolCall:
    """One tool call the model asked for.

    ``arguments`` is the parsed JSON object. When the model sent argument text that is not
    a JSON object, ``arguments`` is ``{}`` and ``raw_arguments`` keeps the text exactly as
    it arrived: the tool step reports it to the model, and the client sends it back verbatim.
    """

    tool_call_id: str
    name: str
    arguments: dict = field(default_factory=dict)
    raw_arguments: Union[str, None] = None

    @classmethod
    def from_arguments_text(cls, tool_call_id: str, name: str, text: str) -> "ToolCall":
        """Build a call from the wire's argument string; blank text means no arguments."""
        if not text.strip():
            return cls(tool_call_id, name, {})
        try:
            parsed = json.loads(text)
        except ValueError:
            return cls(tool_call_id, name, {}, raw_arguments=text)
        if not isinstance(parsed, dict):
            return cls(tool_call_id, name, {}, raw_arguments=text)
        return cls(tool_call_id, name, parsed)

    def to_dict(self) -> dict:
        """Return the JSON-ready form; ``raw_arguments`` appears only when it is set."""
        data: dict[str, Any] = {
            "type": "tool_call",
            "tool_call_id": self.tool_call_id,
            "name": self.name,
            "arguments": self.arguments,
        }
        if self.raw_arguments is not None:
            data["raw_arguments"] = self.raw_arguments
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "ToolCall":
        """Rebuild a tool call from ``to_dict`` output."""
        return cls(
            tool_call_id=data["tool_call_id"],
            name=data["name"],
            arguments=data.get("arguments", {}),
            raw_arguments=data.get("raw_arguments"),
        )


@dataclass
class ToolResult:
    """A tool's answer to the ``ToolCall`` with the same ``tool_call_id``.

    ``is_error`` marks a failure the model should see and can act on (unknown tool, bad
    arguments, the tool raised); ``content`` then says what went wrong.
    """

    tool_call_id: str
    name: str
    content: str
    is_error: bool = False

    def to_dict(self) -> dict:
        """Return the JSON-ready form: ``{"type": "tool_result", ...}``."""
        return {
            "type": "tool_result",
            "tool_call_id": self.tool_call_id,
            "name": self.name,
            "content": self.content,
            "is_error": self.is_error,
        }

    @classmethod
    def from_dict(cls, data: dict) -> "ToolResult":
        """Rebuild a tool result from ``to_dict`` output."""
        return cls(
            tool_call_id=data["tool_call_id"],
            name=data["name"],
            content=data["content"],
            is_error=data.get("is_error", False),
        )


AnyMessage = Union[Message, ToolCall, ToolResult]

_KINDS = {"message": Message, "tool_call": ToolCall, "tool_result": ToolResult}


def message_from_dict(data: dict) -> AnyMessage:
    """Rebuild any message from its ``to_dict`` form, choosing the class by ``"type"``.

    Raises ``ValueError`` naming the allowed types when ``"type"`` is missing or unknown.
    """
    kind = _KINDS.get(data.get("type"))
    if kind is None:
        raise ValueError(f"message type must be one of {', '.join(_KINDS)}; got {data.get('type')!r}")
    return kind.from_dict(data)


def conversation_to_json(conversation: list) -> str:
    """Return the conversation as a JSON array of message dicts."""
    return json.dumps([message.to_dict() for message in conversation], ensure_ascii=False)


def conversation_from_json(text: str) -> list:
    """Rebuild a conversation from ``conversation_to_json`` output."""
    return [message_from_dict(data) for data in json.loads(text)]
