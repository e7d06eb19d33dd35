"""A scripted HTTP server on 127.0.0.1 for wire tests, using only the standard library.

``LoopbackServer`` answers each request with the next ``Reply`` of its script and records
what it received (method, path, headers, JSON body). A reply can be sent whole, or in
pieces with chunked encoding, waiting on ``threading.Event`` gates between pieces; it can
hold back its answer until an event is set (to make a client time out), and it can end
early by closing the connection mid-body or by resetting it. A request past the end of
the script is answered with HTTP 599 and recorded, so a test sees the mistake.

    with LoopbackServer([Reply(body={"choices": []})]) as server:
        client = LlmClient("m", server.base_url)   # http://127.0.0.1:<port>/v1
        ...
        assert server.requests[0].body["model"] == "m"
"""

import json
import os
import socket
import struct
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parent.parent

WAIT_SECONDS = 10.0
"""The longest a reply waits on a gate or hold, so a failing test cannot hang."""


@dataclass
class Reply:
    """One scripted HTTP response.

    ``body`` is bytes, text, or a dict/list sent as JSON, with its ``Content-Length``.
    ``pieces`` instead sends each piece as one chunk of a chunked body, flushed at once.
    ``gates[i]`` is waited on before piece ``i`` is sent; ``gates[len(pieces)]`` before the
    body ends. ``arrived`` is set when the request for this reply has been received, so a
    test knows the client is now waiting. ``hold`` is waited on before anything is sent.
    ``ending`` is ``"complete"``, ``"cut"`` (close mid-body: chunked without its last chunk,
    or half of ``body`` under the full ``Content-Length``), ``"reset"`` (the same, then a TCP
    reset instead of a close) or ``"drop"`` (a TCP reset before anything is sent).
    ``content_type`` ``None`` sends no ``Content-Type`` header.
    """

    status: int = 200
    body: Any = b""
    pieces: list | None = None
    headers: dict = field(default_factory=dict)
    content_type: str | None = "application/json"
    gates: dict = field(default_factory=dict)
    hold: threading.Event | None = None
    ending: str = "complete"
    arrived: threading.Event | None = None


@dataclass
class Received:
    """One request the server received; ``body`` is the parsed JSON, or ``None`` if it was not JSON."""

    method: str
    path: str
    headers: dict
    raw: bytes
    body: Any


def sse_pieces(*chunks: Any, done: bool = True) -> list:
    """Return event-stream pieces: one ``data:`` event per chunk (dicts as JSON), then ``[DONE]``."""
    pieces = [f"data: {chunk if isinstance(chunk, str) else json.dumps(chunk)}\n\n" for chunk in chunks]
    return pieces + ["data: [DONE]\n\n"] if done else pieces


def chat_completion(text: str | None = None, tool_calls: tuple = (), usage: dict | None = None) -> dict:
    """Return a ``chat.completion`` body as OpenAI sends it: ``text`` and ``(id, name, arguments)`` calls."""
    message: dict = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
            for call_id, name, arguments in tool_calls
        ]
    body = {
        "id": "chatcmpl-loopback",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}],
    }
    return body if usage is None else {**body, "usage": usage}


def agent_cli(*arguments: str, **env: str) -> dict:
    """Keyword arguments for ``subprocess``: ``python agent.py *arguments`` in the project, its
    environment without OPENAI_* variables but with ``env``."""
    kept = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI_")}
    return {"args": [sys.executable, "agent.py", *arguments], "cwd": PROJECT, "env": {**kept, **env}}


def free_port() -> int:
    """Return a port on 127.0.0.1 that nothing listens on (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LoopbackServer:
    """A scripted HTTP/1.1 server on 127.0.0.1; use it as a context manager.

    ``requests`` lists what was received, oldest first; ``base_url`` ends in ``/v1``.
    """

    def __init__(self, script: list) -> None:
        self.script = list(script)
        self.requests: list[Received] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._server.handle_error = lambda request, address: None  # a client that hung up is no error here
        self.base_url = f"http://127.0.0.1:{self._server.server_port}/v1"

    def __enter__(self) -> "LoopbackServer":
        threading.Thread(target=self._server.serve_forever, args=(0.01,), daemon=True).start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        for reply in self.script:  # release any reply still waiting, so its thread ends
            for event in [reply.hold, *reply.gates.values()]:
                if event is not None:
                    event.set()
        self._server.shutdown()
        self._server.server_close()

    def next_reply(self, received: Received) -> Reply:
        """Record a request and return the reply the script holds for it."""
        with self._lock:
            number = len(self.requests)
            self.requests.append(received)
        if number >= len(self.script):
            return Reply(599, {"error": {"message": f"loopback script ran out at request {number + 1}"}})
        return self.script[number]


def _handler_for(server: LoopbackServer) -> type:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self._answer()

        def log_message(self, *args: Any) -> None:
            pass

        def _answer(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            headers = {name.lower(): value for name, value in self.headers.items()}
            reply = server.next_reply(Received(self.command, self.path, headers, raw, body))
            if reply.arrived is not None:
                reply.arrived.set()
            if reply.hold is not None:
                reply.hold.wait(WAIT_SECONDS)
            self.close_connection = True
            if reply.ending == "drop":
                self._reset()
                return
            self.send_response(reply.status)
            if reply.content_type is not None:
                self.send_header("Content-Type", reply.content_type)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.send_header("Connection", "close")
            if reply.pieces is None:
                self._send_whole(reply)
            else:
                self._send_pieces(reply)
            if reply.ending == "reset":
                self._reset()

        def _reset(self) -> None:  # SO_LINGER 0: close() sends a TCP reset
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()

        def _send_whole(self, reply: Reply) -> None:
            data = _as_bytes(reply.body)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data if reply.ending == "complete" else data[: len(data) // 2])

        def _send_pieces(self, reply: Reply) -> None:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for number, piece in enumerate(reply.pieces):
                self._wait(reply, number)
                data = _as_bytes(piece)
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
            self._wait(reply, len(reply.pieces))
            if reply.ending == "complete":
                self.wfile.write(b"0\r\n\r\n")

        def _wait(self, reply: Reply, number: int) -> None:
            gate = reply.gates.get(number)
            if gate is not None:
                gate.wait(WAIT_SECONDS)

    return Handler


def _as_bytes(body: Any) -> bytes:
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode("utf-8")
    return json.dumps(body).encode("utf-8")
