"""The wire: LlmRequest and LlmResponse, and LlmClient for OpenAI-compatible servers.

(Being written: the types below are settled; the client body is in progress.)

Needs ``messages`` and ``tools``.
"""

from dataclasses import dataclass, field
from typing import Callable, Union

from messages import AnyMessage, Message, ToolCall, ToolResult
from tools import Tool


@dataclass
class LlmRequest:
    """What to send to the model.

    ``instructions`` become system messages ahead of ``contents``; ``contents`` is the
    conversation (our message dataclasses); ``tools`` are offered to the model;
    ``tool_choice`` is ``"auto"``, ``"none"``, ``"required"``, a tool's name, or ``None``
    to leave it to the server's default.
    """

    instructions: list[str] = field(default_factory=list)
    contents: list[AnyMessage] = field(default_factory=list)
    tools: list[Tool] = field(default_factory=list)
    tool_choice: Union[str, None] = None


@dataclass
class LlmResponse:
    """What came back: the model's new messages, or why there are none.

    ``content`` holds the reply as our messages: an assistant ``Message`` if the model
    wrote text, then one ``ToolCall`` per call. ``error_message`` is set when the call
    failed (HTTP error, timeout, unreadable body, broken stream); ``content`` then holds
    whatever arrived before the failure. ``usage_metadata`` is
    ``{"input_tokens": int | None, "output_tokens": int | None}`` or ``None`` when the
    server reported no usage. ``finish_reason`` is the server's word as sent (``None``
    when it sent none); ``is_truncated`` is true when the reply was cut off at the length
    limit, so its tool calls may be half written.
    """

    content: list[AnyMessage] = field(default_factory=list)
    error_message: Union[str, None] = None
    usage_metadata: Union[dict, None] = None
    finish_reason: Union[str, None] = None
    is_truncated: bool = False
    reasoning: Union[str, None] = None
    refusal: Union[str, None] = None
    status_code: Union[int, None] = None

    @property
    def text(self) -> str:
        """The assistant text of the reply, ``""`` when there is none."""
        return "".join(m.content for m in self.content if isinstance(m, Message))

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The tool calls of the reply, in the order the model made them."""
        return [m for m in self.content if isinstance(m, ToolCall)]
