"""The wire: LlmRequest and LlmResponse, and LlmClient for OpenAI-compatible servers.

``LlmClient.generate`` makes one chat-completions call and returns an ``LlmResponse``; it
never raises for what the network or the server does. The mapping is written as dicts
shaped like the OpenAI spec, each server quirk marked where it is handled:
``_build_messages`` and ``LlmClient._build_body`` build the request, ``_parse_response``
reads the response. A stream is folded into the body a plain call returns, then read by
the same ``_parse_response``.

Needs ``messages`` and ``tools``.

>>> conversation = [Message("user", "2 + 3?"), ToolCall("call_1", "add", {"a": 2, "b": 3})]
>>> for message in _build_messages(LlmRequest(["Be brief."], conversation)):
...     print(message)
{'role': 'system', 'content': 'Be brief.'}
{'role': 'user', 'content': '2 + 3?'}
{'role': 'assistant', 'content': '', 'tool_calls': [{'id': 'call_1', 'type': 'function', 'function': {'name': 'add', 'arguments': '{"a": 2, "b": 3}'}}]}
>>> _parse_response({"choices": [{"message": {"content": "5"}, "finish_reason": "stop"}]}).text
'5'
"""

import email.message
import email.utils
import hashlib
import http.client
import json
import os
import random
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from messages import AnyMessage, Message, ToolCall, ToolResult
from tools import Tool

DEFAULT_BASE_URL = "https://api.openai.com/v1"
"""Where requests go when neither ``base_url`` nor ``$OPENAI_BASE_URL`` says otherwise."""

MAX_RETRY_DELAY = 60.0
"""The longest wait between two attempts, in seconds, whatever the server asks for."""

MAX_ERROR_CHARS = 500
"""How much of an error body that is not JSON an ``error_message`` quotes."""

OnText = Callable[[str], None]
"""The streaming callback: called with each piece of the reply's text as it arrives."""

EMPTY_STREAM = "the stream was empty"
"""A stream with no byte in it: llama-cpp-python answers a streamed "auto" tool call so; asked again unstreamed."""


@dataclass
class LlmRequest:
    """What to send to the model.

    ``instructions`` (a str, or a list of them) become one system message ahead of
    ``contents``, the conversation (our message dataclasses); ``tools`` are offered to the model;
    ``tool_choice`` is ``"auto"``, ``"none"``, ``"required"``, a tool's name, or ``None``
    to leave it to the server's default.
    """

    instructions: list[str] | str = field(default_factory=list)
    contents: list[AnyMessage] = field(default_factory=list)
    tools: list[Tool] = field(default_factory=list)
    tool_choice: str | None = None


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
    error_message: str | None = None
    usage_metadata: dict | None = None
    finish_reason: str | None = None
    is_truncated: bool = False
    reasoning: str | None = None
    refusal: str | None = None
    status_code: int | None = None

    @property
    def text(self) -> str:
        """The assistant text of the reply, ``""`` when there is none."""
        return "".join(m.content for m in self.content if isinstance(m, Message))

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The tool calls of the reply, in the order the model made them."""
        return [m for m in self.content if isinstance(m, ToolCall)]


class LlmClient:
    """A client for one model on an OpenAI-compatible chat-completions server.

    ``base_url`` defaults to ``$OPENAI_BASE_URL``, else OpenAI's, and ``api_key`` to
    ``$OPENAI_API_KEY``; both are read when the client is made. The key goes in
    ``Authorization: Bearer KEY``, or in the header ``api_key_header`` names; without a key
    no such header is sent, as local servers (Ollama, llama.cpp, vLLM) need.
    ``headers`` go with every request and ``query`` into its URL. For Azure OpenAI's dated
    API pass the deployment URL as ``base_url`` with ``api_key_header="api-key"`` and
    ``query={"api-version": "2024-10-21"}``; for OpenRouter's rankings,
    ``headers={"HTTP-Referer": ..., "X-Title": ...}``. Other keyword arguments
    (``temperature``, ``max_completion_tokens``, ``seed``, ``response_format``,
    ``parallel_tool_calls``, ...) go into every request body as given; ``None`` values are
    left out.

    ``timeout`` (seconds) bounds each wait on the network: connecting, the answer, and each
    read of a stream. ``max_retries`` extra attempts follow a failure worth retrying (see
    ``generate``), waiting with ``sleep``. ``stream_usage=False`` stops asking streams for
    usage, for servers that reject ``stream_options``. Raises ``ValueError`` for a base URL
    that is not http(s), a negative ``max_retries``, a config key the client sets itself, and
    a key or header value with a line break, another control character or a character
    outside latin-1 (a curly quote, an emoji) in it, without quoting the value.
    The key appears in neither ``repr`` nor any error message.
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        api_key_header: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        headers: dict | None = None,
        query: dict | None = None,
        stream_usage: bool = True,
        sleep: Callable[[float], None] = time.sleep,
        **config: Any,
    ) -> None:
        self.model = model
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self.api_key = os.environ.get("OPENAI_API_KEY") if api_key is None else api_key
        self.api_key_header = api_key_header
        self.timeout, self.max_retries, self.sleep = timeout, max_retries, sleep
        self.headers, self.query, self.stream_usage = dict(headers or {}), dict(query or {}), stream_usage
        if not self.base_url.startswith(("http://", "https://")):
            # the value is not quoted: a key passed in the base_url's place must not be shown
            raise ValueError("base_url must start with http:// or https:// (is the key in its place?)")
        if not self.base_url.isascii():
            raise ValueError("base_url must be ASCII: a host name in its xn-- form, a path percent-encoded")
        if max_retries < 0:
            raise ValueError(f"max_retries is the number of extra attempts, 0 or more; got {max_retries}")
        for name, value in [(api_key_header or "api_key", self.api_key or ""), *self.headers.items()]:
            if not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", name):  # RFC 9110's token characters
                raise ValueError(f"header name {name!r} is not a valid HTTP header name")
            # the value is never quoted: http.client's own errors would quote the header, key and all
            if not str(value).isprintable():
                raise ValueError(f"{name} holds a line break or other control character (a key file's newline?)")
            if any(ord(char) > 0xFF for char in str(value)):  # http.client sends header values as latin-1
                raise ValueError(f"{name} holds a character an HTTP header cannot carry (a pasted curly quote?)")
        for key in ("messages", "tools", "tool_choice", "stream"):
            if key in config:
                raise ValueError(f"{key!r} cannot be set as config: the client builds it from the LlmRequest")
        self.config = {key: value for key, value in config.items() if value is not None}
        self._opener = urllib.request.build_opener(_RefuseRedirects)

    def __repr__(self) -> str:
        return f"LlmClient(model={self.model!r}, base_url={self.base_url!r})"

    def generate(self, request: LlmRequest, on_text: OnText | None = None) -> LlmResponse:
        """Return the model's reply to ``request``; never raises for what the network or server does.

        With ``on_text`` the reply is streamed and each piece of text is handed to it as soon
        as it arrives; the ``LlmResponse`` is the one a plain call returns. A failure comes
        back as ``error_message`` (``"HTTP 429: <the server's message>"``, a timeout, a broken
        stream), with ``content`` holding whatever arrived first. No answer at all and HTTP
        408, 409, 429 and 5xx are retried, after the server's ``Retry-After`` or else an
        exponential backoff with jitter. A response that began (HTTP 200) is never requested
        again, so no text reaches ``on_text`` twice. A redirect is not followed, so the key goes
        nowhere else: it comes back as ``"HTTP 302: ..."``. What ``on_text`` raises propagates.
        A stream that comes back empty is asked for again without streaming, as a retry (its
        text then reaches ``on_text`` in one piece): llama-cpp-python cannot stream "auto" tool
        calls. At most ``max_retries + 1`` requests are made in all.
        """
        attempts = self.max_retries + 1
        body = self._build_body(request, stream=on_text is not None)
        response, used = self._send_with_retries(body, on_text, attempts)
        if on_text is not None and response.error_message == EMPTY_STREAM and used < attempts:
            unstreamed = self._build_body(request, stream=False)  # nothing reached on_text yet
            response, _ = self._send_with_retries(unstreamed, None, attempts - used)
            if response.text:
                on_text(response.text)
        return self._redacted(response)

    def _send_with_retries(self, body: dict, on_text: OnText | None, attempts: int) -> tuple[LlmResponse, int]:
        """Send ``body`` up to ``attempts`` times while failures are worth retrying; return the
        response and the number of attempts made."""
        attempt = 1
        while True:
            response, retry_after = self._send(body, on_text)
            if attempt >= attempts or not _should_retry(response):
                return response, attempt
            self.sleep(_backoff(attempt - 1) if retry_after is None else retry_after)
            attempt += 1

    def _build_body(self, request: LlmRequest, stream: bool) -> dict:
        """Return the JSON body of ``POST /chat/completions`` for ``request``, with no null field."""
        body: dict[str, Any] = {"model": self.model, "messages": _build_messages(request)}
        if request.tools:  # tool_choice without tools is rejected: both are sent, or neither
            body["tools"] = [tool.tool_definition() for tool in request.tools]
            if request.tool_choice in ("auto", "none", "required"):
                body["tool_choice"] = request.tool_choice
            elif request.tool_choice is not None:  # any other string names the tool to call
                body["tool_choice"] = {"type": "function", "function": {"name": request.tool_choice}}
        body.update(self.config)
        if stream:
            body["stream"] = True
            if self.stream_usage:  # OpenAI streams usage only when asked to
                body["stream_options"] = {"include_usage": True}
        return body

    def _send(self, body: dict, on_text: OnText | None) -> tuple[LlmResponse, float | None]:
        """Make one attempt; return the response and the wait the server asked for, if any."""
        url = f"{self.base_url}/chat/completions"
        if self.query:
            url += "?" + urllib.parse.urlencode(self.query)
        # a User-Agent of our own: some CDNs refuse urllib's default one
        headers = {"Content-Type": "application/json", "User-Agent": "plainagent"}
        if self.api_key and self.api_key_header:  # Azure's dated API: "api-key: KEY"
            headers[self.api_key_header] = self.api_key
        elif self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = json.dumps(body).encode("utf-8")
        request = urllib.request.Request(url, data, {**headers, **self.headers}, method="POST")
        try:
            response = self._opener.open(request, timeout=self.timeout)
        except urllib.error.HTTPError as error:
            with error:
                return _http_error(error), _retry_after(error.headers)
        except (OSError, http.client.HTTPException) as error:  # refused, timed out, closed before answering
            return LlmResponse(error_message=f"no answer from the server: {_describe(error)}"), None
        with response:
            result = _read_stream(response, on_text) if on_text else _read_json(response)
        result.status_code = response.status
        return result, None

    def _redacted(self, response: LlmResponse) -> LlmResponse:
        """Return ``response`` with secrets cut out of its error message: a server may echo a key back.

        Secrets are the key and the header and query values named like one, if 8 characters
        or longer (a shorter value cannot be told from ordinary words). A quote cut short at
        ``MAX_ERROR_CHARS`` that ends in the first 8 or more characters of a secret loses them too.
        """
        pairs = [*self.headers.items(), *self.query.items()]
        named = [value for name, value in pairs if re.search("key|auth|token|secret", name, re.IGNORECASE)]
        for secret in [str(value) for value in (self.api_key, *named) if value]:
            if len(secret) >= 8 and response.error_message:
                response.error_message = _redact(response.error_message, secret)
        return response


def _redact(message: str, secret: str) -> str:
    """Return ``message`` with ``secret`` replaced by ``[redacted]``, also where a quote cut it short."""
    message = message.replace(secret, "[redacted]")
    for size in range(len(secret) - 1, 7, -1):  # _plain_text cut the quote inside the secret
        if message.endswith(secret[:size] + "..."):
            return message[: -size - 3] + "[redacted]..."
    return message


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """Leaves every redirect unfollowed, so it comes back as an HTTP error.

    urllib would send all our headers, the key among them, to wherever ``Location`` points,
    and turn the POST into a GET; a chat-completions endpoint has no reason to move.
    """

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # None: no handler takes it, so urllib raises HTTPError with the 3xx status


def _should_retry(response: LlmResponse) -> bool:
    """True for a failure worth another attempt: no answer at all, or HTTP 408, 409, 429 or 5xx."""
    status = response.status_code
    return response.error_message is not None and (status is None or status in (408, 409, 429) or status >= 500)


def _backoff(attempt: int) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (from 0): 1, 2, 4 ... s, less up to half."""
    ceiling = min(MAX_RETRY_DELAY, 2.0**attempt)
    return ceiling / 2 + random.random() * ceiling / 2


def _retry_after(headers: email.message.Message) -> float | None:
    """Return the wait an error response asks for, in seconds up to ``MAX_RETRY_DELAY``, or ``None``."""
    milliseconds, value = headers.get("retry-after-ms"), headers.get("retry-after")
    try:
        if milliseconds:  # OpenAI and Azure also send the wait in milliseconds
            seconds = float(milliseconds) / 1000
        elif value and re.fullmatch(r"\s*[\d.]+\s*", value):
            seconds = float(value)
        elif value:  # the other form of Retry-After: an HTTP date
            seconds = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
        else:
            return None
    except (ValueError, TypeError):  # a value that is neither
        return None
    return max(0.0, min(seconds, MAX_RETRY_DELAY))


# --- our messages to the wire ------------------------------------------------------------


def _build_messages(request: LlmRequest) -> list[dict]:
    """Return the wire ``messages``: the instructions, then the conversation.

    An assistant ``Message`` and the ``ToolCall`` objects after it are one reply, so they
    become one assistant message carrying ``tool_calls``.
    """
    messages: list[dict] = []
    if request.instructions:  # one system message: many chat templates take only one, and first
        instructions = [request.instructions] if isinstance(request.instructions, str) else request.instructions
        messages.append({"role": "system", "content": "\n\n".join(instructions)})
    for item in request.contents:
        if isinstance(item, ToolCall):
            if not messages or messages[-1]["role"] != "assistant":
                # A reply of tool calls only gets content "", the form most servers accept:
                # null is refused by llama.cpp (ggml-org/llama.cpp#13471), llama-cpp-python,
                # Ollama (pydantic/pydantic-ai#5206) and LM Studio (lmstudio-bug-tracker#261);
                # a missing key breaks chat templates (abetlen/llama-cpp-python#1805); OpenAI,
                # DeepSeek and Bedrock's OpenAI endpoint take "" (agentjido/req_llm#966).
                messages.append({"role": "assistant", "content": ""})
            messages[-1].setdefault("tool_calls", []).append(_wire_tool_call(item))
        elif isinstance(item, ToolResult):
            # no "name" on a tool message: the official schema does not allow it
            messages.append({"role": "tool", "tool_call_id": item.tool_call_id, "content": item.content})
        else:
            messages.append(_wire_message(item))
    return messages


def _wire_message(message: Message) -> dict:
    """Return a ``Message`` as a wire message."""
    if message.reasoning_content is None:
        return {"role": message.role, "content": message.content}
    # DeepSeek in thinking mode refuses tool turns sent back without their reasoning_content
    return {"role": message.role, "content": message.content, "reasoning_content": message.reasoning_content}


def _wire_tool_call(call: ToolCall) -> dict:
    """Return a ``ToolCall`` as a wire tool call."""
    # arguments travel as a JSON string, not an object; text that was not JSON goes back as it came
    arguments = call.raw_arguments if call.raw_arguments is not None else json.dumps(call.arguments, ensure_ascii=False)
    return {"id": call.tool_call_id, "type": "function", "function": {"name": call.name, "arguments": arguments}}


# --- the wire to our messages ------------------------------------------------------------


def _parse_response(body: Any) -> LlmResponse:
    """Return the ``LlmResponse`` for a ``chat.completion`` body, read from choice 0.

    Takes content null, missing, a list of parts or an object; arguments "", null, missing,
    an object or broken JSON; tool calls without ids. A body that is not an object, holds an
    ``error`` or has no choices gives an ``error_message``.
    """
    if not isinstance(body, dict):
        return LlmResponse(error_message=f"response is not a JSON object: {_plain_text(json.dumps(body))}")
    if body.get("error") is not None:  # some gateways answer 200 with an error object
        return LlmResponse(error_message=f"error in response: {_provider_message(json.dumps(body))}")
    choices = [choice for choice in _array(body.get("choices")) if isinstance(choice, dict)]
    if not choices:
        return LlmResponse(error_message="response has no choices")
    choice = next((choice for choice in choices if choice.get("index", 0) == 0), choices[0])
    message = _object(choice.get("message"))  # Azure's content filter sends a choice without one
    text, thinking = _split_content(message.get("content"))
    # message.function_call (the legacy API) is not read: we never send "functions", and
    # llama-cpp-python sends it beside tool_calls with a wrong name in "auto" mode
    calls = [_parse_tool_call(_object(call), n, body) for n, call in enumerate(_array(message.get("tool_calls")))]
    refusal = message.get("refusal")
    finish_reason = choice.get("finish_reason")  # kept as sent: Together says "eos", Snowflake ""
    reasoning_content = message.get("reasoning_content")  # kept to be sent back, "" included
    reasoning_content = reasoning_content if isinstance(reasoning_content, str) else None
    reply = [Message("assistant", text, reasoning_content)] if text or reasoning_content is not None else []
    return LlmResponse(
        content=[*reply, *calls],
        usage_metadata=_usage(body.get("usage")),
        finish_reason=finish_reason if isinstance(finish_reason, str) else None,
        is_truncated=finish_reason == "length",
        reasoning=_reasoning(message) or thinking or None,
        refusal=refusal if isinstance(refusal, str) and refusal else None,
    )


def _split_content(content: Any) -> tuple[str, str]:
    """Return ``(text, thinking)`` from a message's ``content``, whatever its shape."""
    if content is None:
        return "", ""
    if isinstance(content, str):
        return content, ""
    if not isinstance(content, list):  # Cloudflare sends an object under response_format
        return json.dumps(content, ensure_ascii=False), ""
    text, thinking = [], []
    for part in content:
        part = {"type": "text", "text": part} if isinstance(part, str) else _object(part)
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            text.append(part["text"])
        elif part.get("type") == "thinking":  # Mistral's Magistral: {"thinking": [{"text": ...}]}
            thinking.append(_split_content(part.get("thinking"))[0])
    return "".join(text), "".join(thinking)


def _reasoning(message: dict) -> str | None:
    """Return the reasoning text a server sent beside the content, or ``None``."""
    for key in ("reasoning_content", "reasoning"):  # DeepSeek and vLLM; Groq, OpenRouter, Ollama
        if isinstance(message.get(key), str) and message[key]:
            return message[key]
    return None


def _parse_tool_call(call: dict, position: int, body: dict) -> ToolCall:
    """Return one wire tool call as a ``ToolCall``; arguments that are not JSON stay as raw text."""
    function = _object(call.get("function"))
    name = _text(function.get("name"))
    arguments = function.get("arguments")
    call_id = _text(call.get("id")) or _fallback_call_id(body, position, name, arguments)  # Gemini sends ""
    if isinstance(arguments, dict):  # some servers send an object, not a JSON string
        return ToolCall(call_id, name, arguments)
    if not isinstance(arguments, str):  # missing or null means no arguments (OpenRouter)
        arguments = "" if arguments is None else json.dumps(arguments)
    return ToolCall.from_arguments_text(call_id, name, arguments)


def _fallback_call_id(body: dict, position: int, name: str, arguments: Any) -> str:
    """Return an id for a tool call sent without one, from a hash of what identifies the call.

    The hash covers the response's ``id`` and ``created`` (when they are there) and the call's
    name and argument text, never the whole body, which may be nested too deep to write out.
    A replayed recording gets the same ids and calls of one response get different ones, by
    position; two responses without ``id`` and ``created`` that make the same call share it.
    """
    created = body.get("created")
    parts = [_text(body.get("id")), created if type(created) is int else None, name, _text(arguments)]
    digest = hashlib.sha256(json.dumps(parts).encode("utf-8")).hexdigest()
    return f"call_{digest[:12]}_{position}"


def _usage(usage: Any) -> dict | None:
    """Return ``usage_metadata`` from a wire ``usage`` object; a missing count is ``None``."""
    if not isinstance(usage, dict):
        return None
    counts = {"input_tokens": usage.get("prompt_tokens"), "output_tokens": usage.get("completion_tokens")}
    return {key: count if type(count) is int else None for key, count in counts.items()}  # not a whole number: missing


def _object(value: Any) -> dict:
    """Return ``value`` if it is a JSON object, else ``{}``: a wrong shape reads as absent."""
    return value if isinstance(value, dict) else {}


def _array(value: Any) -> list:
    """Return ``value`` if it is a JSON array, else ``[]``."""
    return value if isinstance(value, list) else []


def _text(value: Any) -> str:
    """Return ``value`` if it is a JSON string, else ``""``."""
    return value if isinstance(value, str) else ""


# --- reading responses -------------------------------------------------------------------


def _read_json(response: http.client.HTTPResponse) -> LlmResponse:
    """Read a whole JSON body and parse it; a cut, empty or non-JSON body gives ``error_message``."""
    try:
        text = response.read().decode("utf-8", "replace")
    except (OSError, http.client.HTTPException) as error:  # reset, timed out, or cut short
        return LlmResponse(error_message=f"response body broken off: {_describe(error)}")
    if not text.strip():
        return LlmResponse(error_message="the server sent an empty body")
    result = _parse_json(text)
    return LlmResponse(error_message=f"response is not JSON: {_plain_text(text)}") if result is None else result


def _parse_json(text: str) -> LlmResponse | None:
    """Return the response a JSON body holds, or ``None`` when ``text`` is not JSON."""
    try:
        return _parse_response(json.loads(text))  # leading whitespace is fine: OpenRouter pads while it waits
    except ValueError:
        return None
    except RecursionError:  # nested deeper than json.loads, or json.dumps of it again, can go
        return LlmResponse(error_message="response is nested too deep to read")


class _StreamBroken(Exception):
    """The connection failed while a stream was being read."""


def _read_stream(response: http.client.HTTPResponse, on_text: OnText) -> LlmResponse:
    """Fold an event stream of chunks into a ``chat.completion`` body and parse that.

    Text reaches ``on_text`` as each event is read. A broken connection, data that is not
    JSON, an ambiguous tool call or an error sent in the stream stops the reading with
    ``error_message`` set, keeping what came before. A stream may end without ``[DONE]``.
    A body with no event that is JSON is read as a plain call's reply, its text handed to
    ``on_text`` at once: a server that ignored ``"stream": true``, or sent an error object.
    """
    body: dict = {}
    problem, count = None, 0
    before_data: list[str] = []  # the lines before the first data line: all of a body with no event
    try:
        for event, data in _sse_events(_noting(_lines(response), before_data)):
            count += 1
            if data.strip() == "[DONE]":
                break
            problem = _take_event(body, event, data, on_text)
            if problem:
                break
    except _StreamBroken as error:
        problem = f"stream broken off: {error}"
    if count == 0 and not problem:
        return _read_unstreamed("\n".join(before_data), on_text)
    result = _parse_response(body)
    if problem:
        result.error_message = problem
    return result


def _read_unstreamed(text: str, on_text: OnText) -> LlmResponse:
    """Read a body that held no event: JSON is the whole reply, and anything else an error."""
    # not told by Content-Type: Together sends a stream without text/event-stream (conformance
    # case together__sse-text), so only a body with no event and that parses counts as JSON
    if not text.strip():  # llama-cpp-python answers a streamed "auto" tool call with an empty body
        return LlmResponse(error_message=EMPTY_STREAM)
    result = _parse_json(text)
    if result is None:  # an HTML page from a proxy, say
        return LlmResponse(error_message=f"the stream held no events: {_plain_text(text)}")
    if result.text:
        on_text(result.text)
    return result


def _noting(lines: Iterator[str], noted: list[str]) -> Iterator[str]:
    """Yield ``lines``, noting in ``noted`` each one that comes before the first data line."""
    for line in lines:
        yield line
        if line.partition(":")[0] == "data":  # no line of a JSON body starts so
            yield from lines
            return
        noted.append(line)


def _lines(response: http.client.HTTPResponse) -> Iterator[str]:
    """Yield the lines of a response as they arrive, without their CRLF, LF or CR ending."""
    pending = b""
    try:
        # read1 returns as soon as bytes arrive. Not readline: it hides a chunked body cut short.
        while data := response.read1(65536):
            *complete, pending = (pending + data).split(b"\n")
            for line in complete:
                yield from line.removesuffix(b"\r").decode("utf-8", "replace").split("\r")
    except (OSError, http.client.HTTPException) as error:  # reset, timed out, chunked body cut short
        raise _StreamBroken(_describe(error)) from error
    if response.length:  # read1 ends quietly when a body with a Content-Length is cut short
        raise _StreamBroken(f"the body ended {response.length} bytes short of its Content-Length")
    if pending:
        yield from pending.decode("utf-8", "replace").split("\r")


def _sse_events(lines: Iterator[str]) -> Iterator[tuple[str | None, str]]:
    """Yield ``(event type, data)`` for each event of a text/event-stream, per the HTML spec.

    Data lines are joined with "\\n"; comment lines (":") and unknown fields are skipped; an
    event is dispatched at a blank line and at the end of the stream.
    """
    event: str | None = None
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                yield event, "\n".join(data)
            event, data = None, []
        elif not line.startswith(":"):  # OpenRouter sends ": OPENROUTER PROCESSING" comments
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "data":
                data.append(value)
            elif name == "event":
                event = value
    if data:
        yield event, "\n".join(data)


def _take_event(body: dict, event: str | None, data: str, on_text: OnText) -> str | None:
    """Fold one event into ``body``; return what went wrong, or ``None``."""
    if event == "error":  # Groq ends a failed stream with an "event: error"
        return f"error in stream: {_provider_message(data)}"
    try:
        chunk = json.loads(data)
    except (ValueError, RecursionError):  # RecursionError: nested too deep to read
        return f"stream data is not JSON: {_plain_text(data)}"
    if not isinstance(chunk, dict):
        return f"stream data is not a JSON object: {_plain_text(data)}"
    problem = _merge_chunk(body, chunk, on_text)
    if chunk.get("error") is not None:  # OpenRouter sends an upstream failure as a chunk with "error"
        return f"error in stream: {_provider_message(data)}"
    return problem


def _merge_chunk(body: dict, chunk: dict, on_text: OnText) -> str | None:
    """Fold one ``chat.completion.chunk`` into ``body``; return a problem, or ``None``."""
    for key in ("id", "created", "model"):  # Azure's first chunk has an empty id and model
        if chunk.get(key) and not body.get(key):
            body[key] = chunk[key]
    if chunk.get("usage") is not None:  # the last one counts: xAI sends usage on every chunk
        body["usage"] = chunk["usage"]
    for choice in _array(chunk.get("choices")):  # the usage chunk has "choices": []
        if isinstance(choice, dict) and choice.get("index", 0) == 0:
            empty = {"index": 0, "message": {"role": "assistant", "content": []}, "finish_reason": None}
            target = body.setdefault("choices", [empty])[0]
            if choice.get("finish_reason") is not None:
                target["finish_reason"] = choice["finish_reason"]
            return _merge_delta(target["message"], _object(choice.get("delta")), on_text)
    return None


def _merge_delta(message: dict, delta: dict, on_text: OnText) -> str | None:
    """Fold one ``delta`` into the message built so far; its text goes on to ``on_text``."""
    text, thinking = _split_content(delta.get("content"))
    parts = message["content"]  # kept as parts: {"type": "text", "text": ...} and "thinking" alike
    for kind, piece in (("thinking", thinking), ("text", text)):
        if piece and parts and parts[-1]["type"] == kind:
            parts[-1][kind] += piece
        elif piece:
            parts.append({"type": kind, kind: piece})
    if text:
        on_text(text)
    for key in ("reasoning_content", "reasoning", "refusal"):
        if isinstance(delta.get(key), str):
            message[key] = message.get(key, "") + delta[key]
    for call_delta in _array(delta.get("tool_calls")):
        problem = _merge_tool_call(message.setdefault("tool_calls", []), _object(call_delta))
        if problem:
            return problem
    return None


def _merge_tool_call(calls: list, delta: dict) -> str | None:
    """Fold one tool-call delta into ``calls``; return a problem when its index is ambiguous."""
    call = _find_call(calls, delta)
    if call is None:
        call = {"index": delta.get("index"), "id": "", "type": "function", "function": {"name": "", "arguments": ""}}
        calls.append(call)
    new_id, function = delta.get("id") or "", _object(delta.get("function"))
    if new_id and call["id"] and new_id != call["id"]:
        return f"tool calls {call['id']!r} and {new_id!r} were both streamed with index {call['index']}"
    # llama.cpp and Kimi repeat the id and name in every chunk: take each once, never join them
    call["id"] = call["id"] or new_id
    call["function"]["name"] = call["function"]["name"] or function.get("name") or ""
    arguments, so_far = function.get("arguments"), call["function"]["arguments"]
    if isinstance(arguments, str) and isinstance(so_far, str):  # split at arbitrary points
        call["function"]["arguments"] = so_far + arguments
    elif arguments is not None:  # an object, not a JSON string
        call["function"]["arguments"] = arguments
    return None


def _find_call(calls: list, delta: dict) -> dict | None:
    """Return the call a delta continues: by ``index``, else by ``id``, else the latest one."""
    if delta.get("index") is not None:
        return next((call for call in calls if call["index"] == delta["index"]), None)
    if delta.get("id"):  # Mistral and Ollama stream whole calls without "index", told apart by id
        return next((call for call in calls if call["id"] == delta["id"]), None)
    return calls[-1] if calls else None  # Gemini: one whole call with neither (its id is "")


# --- error messages ----------------------------------------------------------------------


def _http_error(error: urllib.error.HTTPError) -> LlmResponse:
    """Return the response for an HTTP error status: ``"HTTP 404: <the server's message>"``."""
    try:
        text = error.read().decode("utf-8", "replace")
    except (OSError, http.client.HTTPException):  # the error body itself broke off
        text = ""
    message = _provider_message(text) or http.client.responses.get(error.code, "no message")
    return LlmResponse(error_message=f"HTTP {error.code}: {message}", status_code=error.code)


def _provider_message(text: str) -> str:
    """Return the server's message from an error body; a body that is not JSON, as plain text."""
    try:
        found = _message_in(json.loads(text))
    except (ValueError, RecursionError):  # RecursionError: nested too deep to read
        found = None
    return _plain_text(text) if found is None else found


def _message_in(data: Any) -> str | None:
    """Find the message in parsed error JSON: ``error.message``, ``error``, ``message``, ``detail``."""
    if isinstance(data, list) and data:  # Google wraps its error body in an array
        data = data[0]
    if not isinstance(data, dict):
        return None
    error = data.get("error")
    for found in (_object(error).get("message"), error, data.get("message"), data.get("detail")):
        if isinstance(found, str):  # Mistral puts "message" at the top, FastAPI servers "detail"
            return found
    for value in data.values():  # Portkey wraps the upstream JSON body in a string field
        if isinstance(value, str) and value.lstrip().startswith(("{", "[")):
            try:
                found = _message_in(json.loads(value))
            except (ValueError, RecursionError):
                continue
            if found is not None:
                return found
    return None


def _plain_text(text: str) -> str:
    """Return a body as one short line: HTML tags dropped, whitespace squeezed, cut to ``MAX_ERROR_CHARS``."""
    if text.lstrip().startswith("<"):  # an HTML error page from a proxy
        text = re.sub(r"<[^>]*>", " ", text)
    text = " ".join(text.split())
    return text if len(text) <= MAX_ERROR_CHARS else text[:MAX_ERROR_CHARS] + "..."


def _describe(error: BaseException) -> str:
    """Say what went wrong on the network in a few words (``timed out``, ``Connection refused``)."""
    reason = getattr(error, "reason", error)  # urllib wraps the cause in URLError.reason
    return str(reason) or type(reason).__name__
