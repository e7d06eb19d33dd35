"""The floors: the benchmark's work written by hand over bare ``urllib.request`` and ``json``.

This is what a program that needs no library would write: keep the conversation as wire
dicts, encode it, send it, parse the answer, run the tools it names. No validation, no
retries, no dataclasses. Each floor sends exactly the bytes plainagent sends (``run.py``
checks this through the stub) and parses the whole answer, so the difference is what
plainagent's own code costs.
"""

import json
import urllib.request
from collections.abc import Callable

from workload import FUNCTIONS, MODEL

HEADERS = {"Content-Type": "application/json", "User-Agent": "plainagent"}  # what LlmClient sends


def post(base_url: str, body: dict) -> dict:
    """Send one request and return the parsed ``chat.completion``."""
    data = json.dumps(body).encode("utf-8")
    request = urllib.request.Request(f"{base_url}/chat/completions", data, HEADERS, method="POST")
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def post_streaming(base_url: str, body: dict, on_text: Callable[[str], None]) -> dict:
    """Send one streaming request; hand each piece of text to ``on_text`` and return the
    assembled assistant message (text and tool calls)."""
    body = dict(body, stream=True, stream_options={"include_usage": True})
    data = json.dumps(body).encode("utf-8")
    request = urllib.request.Request(f"{base_url}/chat/completions", data, HEADERS, method="POST")
    text: list[str] = []
    calls: dict[int, dict] = {}
    with urllib.request.urlopen(request, timeout=60) as response:
        for line in response:
            if not line.startswith(b"data: ") or line.startswith(b"data: [DONE]"):
                continue
            for choice in json.loads(line[6:])["choices"]:
                delta = choice["delta"]
                if delta.get("content"):
                    text.append(delta["content"])
                    on_text(delta["content"])
                for piece in delta.get("tool_calls") or []:
                    call = calls.setdefault(
                        piece["index"], {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
                    )
                    call["id"] = call["id"] or piece.get("id", "")
                    call["function"]["name"] = call["function"]["name"] or piece["function"].get("name", "")
                    call["function"]["arguments"] += piece["function"].get("arguments", "")
    return {"role": "assistant", "content": "".join(text), "tool_calls": list(calls.values())}


def request_body(messages: list, tools: list) -> dict:
    """Return the request body for a conversation of wire messages."""
    return {"model": MODEL, "messages": messages, "tools": tools, "tool_choice": "auto"}


def run_loop(send: Callable[[dict], dict], messages: list, tools: list, max_steps: int) -> int:
    """The agent loop by hand: send, run the tool calls in order, repeat until an answer.

    ``send(body)`` returns a ``chat.completion``; ``messages`` grows in place. Returns the
    number of model calls made.
    """
    for step in range(1, max_steps + 1):
        message = send(request_body(messages, tools))["choices"][0]["message"]
        calls = message.get("tool_calls") or []
        if not calls:
            messages.append({"role": "assistant", "content": message.get("content") or ""})
            return step
        messages.append({"role": "assistant", "content": message.get("content") or "", "tool_calls": calls})
        for call in calls:
            result = FUNCTIONS[call["function"]["name"]](**json.loads(call["function"]["arguments"]))
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    return max_steps
