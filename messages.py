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
import os
import warnings
from dataclasses import dataclass, field
from typing import Any

ROLES = ("system", "user", "assistant")


@dataclass
class Message:
    """A text message from the system prompt, the user or the assistant.

    ``reasoning_content`` is an assistant's reasoning as a server sent it under that wire
    name (DeepSeek, vLLM). It is kept with the reply and sent back with it: DeepSeek's
    thinking mode refuses a conversation whose tool-calling turns lack it.
    """

    role: str
    content: str
    reasoning_content: str | None = None

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"Message role must be one of {', '.join(ROLES)}; got {self.role!r}")

    def to_dict(self) -> dict:
        """Return the JSON-ready form: ``{"type": "message", "role": ..., "content": ...}``
        (and ``reasoning_content`` when it is set)."""
        data = {"type": "message", "role": self.role, "content": self.content}
        if self.reasoning_content is not None:
            data["reasoning_content"] = self.reasoning_content
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "Message":
        """Rebuild a message from ``to_dict`` output."""
        return cls(role=data["role"], content=data["content"], reasoning_content=data.get("reasoning_content"))


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
    raw_arguments: str | None = None

    @classmethod
    def from_arguments_text(cls, tool_call_id: str, name: str, text: str) -> "ToolCall":
        """Build a call from the wire's argument string; blank text means no arguments."""
        if not text.strip():
            return cls(tool_call_id, name, {})
        try:
            parsed = json.loads(text)
        except (ValueError, RecursionError):  # RecursionError: nested too deep to read
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


AnyMessage = Message | ToolCall | ToolResult

_KINDS: dict[str, type[Message] | type[ToolCall] | type[ToolResult]] = {
    "message": Message,
    "tool_call": ToolCall,
    "tool_result": ToolResult,
}


def message_from_dict(data: dict) -> AnyMessage:
    """Rebuild any message from its ``to_dict`` form, choosing the class by ``"type"``.

    Raises ``ValueError`` naming the allowed types when ``"type"`` is missing or unknown.
    """
    kind = _KINDS.get(str(data.get("type")))
    if kind is None:
        raise ValueError(f"message type must be one of {', '.join(_KINDS)}; got {data.get('type')!r}")
    return kind.from_dict(data)


def is_model_output(message: object) -> bool:
    """True for what the model writes: assistant messages and tool calls."""
    return isinstance(message, ToolCall) or isinstance(message, Message) and message.role == "assistant"


def model_replies(conversation: list) -> list[list]:
    """Return the model's replies in a conversation, oldest first, each as its messages: an
    assistant message and the tool calls that follow it, or either alone."""
    replies: list[list] = []
    previous = None
    for message in conversation:
        if is_model_output(message):
            if not is_model_output(previous):
                replies.append([])
            replies[-1].append(message)
        previous = message
    return replies


def conversation_to_json(conversation: list) -> str:
    """Return the conversation as a JSON array of message dicts."""
    return json.dumps([message.to_dict() for message in conversation], ensure_ascii=False)


def conversation_from_json(text: str) -> list:
    """Rebuild a conversation from ``conversation_to_json`` output."""
    return [message_from_dict(data) for data in json.loads(text)]


# --- transcripts: a run saved as JSON Lines, one message per line ------------------------

TRANSCRIPT_FORMAT = "plainagent-transcript/1"


def load_transcript(path: "str | os.PathLike") -> tuple[dict, list]:
    """Return ``(settings, conversation)`` from a transcript file.

    The first line is the header with the run's settings; every other line is one message.
    A torn last line (no newline: the process died while writing it) is ignored with a
    warning. A bad complete line raises ``ValueError`` naming it: a crash cannot cause that.
    """
    settings, conversation, _ = _read_transcript(path)
    return settings, conversation


def _read_transcript(path: "str | os.PathLike") -> tuple[dict, list, int]:
    """Return settings, conversation, and the byte length of the complete lines."""
    with open(path, "rb") as file:
        data = file.read()
    *lines, tail = data.split(b"\n")  # tail: bytes after the last newline, a torn line if any
    if tail:
        warnings.warn(f"{path}: ignoring torn last line {len(lines) + 1} ({len(tail)} bytes)", stacklevel=3)
    settings: dict = {}
    conversation: list = []
    for number, line in enumerate(lines, start=1):
        try:
            record = json.loads(line)
            if number == 1 and record.get("type") != "header":
                raise ValueError("the first line must be the transcript header")
            if number == 1:
                settings = record.get("settings", {})
            else:
                conversation.append(message_from_dict(record))
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise ValueError(f"{path}: line {number} is not a valid transcript record: {error}") from None
    return settings, conversation, len(data) - len(tail)


def _starts_like_a_header(path: "str | os.PathLike") -> bool:
    """True when a file begins as our header line does: a torn header, not some other file."""
    with open(path, "rb") as file:
        return file.read(len(_HEADER_START)) == _HEADER_START


_HEADER_START = b'{"type": "header"'


class Transcript:
    """A run's transcript file: every message is written, flushed and fsynced as it comes.

    A new file starts with a header line holding ``settings``. An existing file is read
    (``settings`` and ``conversation`` come from it), a torn last line is cut off, and
    new messages are appended, so a resumed run continues the same file. A file that is not
    a transcript raises ``ValueError`` and is left as it is. Use ``write`` as the agent
    loop's ``on_message``.
    """

    def __init__(self, path: "str | os.PathLike", settings: "dict | None" = None) -> None:
        self.path = path
        kept = 0  # bytes of complete lines already in the file
        if os.path.exists(path) and os.path.getsize(path) > 0:
            if not _starts_like_a_header(path):
                raise ValueError(f"{path} is not a plainagent transcript: it has no header line")
            self.settings, self.conversation, kept = _read_transcript(path)
            with open(path, "r+b") as file:
                file.truncate(kept)
        if not kept:  # a new file, or one whose header line was torn: start it afresh
            self.settings, self.conversation = dict(settings or {}), []
            self._write_line({"type": "header", "format": TRANSCRIPT_FORMAT, "settings": self.settings})

    def write(self, message: AnyMessage) -> None:
        """Append one message as a line and make it durable before returning."""
        self._write_line(message.to_dict())

    def _write_line(self, record: dict) -> None:
        try:
            line = json.dumps(record, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate a server sent ("\ud83d"): escape, keep it
            line = json.dumps(record).encode("ascii")
        with open(self.path, "ab") as file:
            file.write(line + b"\n")
            file.flush()
            os.fsync(file.fileno())
