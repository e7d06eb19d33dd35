"""A loopback stub of an OpenAI chat-completions server, for the benchmarks; standard library only.

``Stub()`` starts it in its own process, so that its work never shows up in the benchmark's
CPU time, and stops it on exit. Run alone (``python bench/stub.py``) it binds 127.0.0.1 on a
free port, prints the port, and serves until its stdin closes, ``MAX_SECONDS`` pass or it has
answered ``MAX_REQUESTS`` requests: it always stops by itself.

The URL says what to answer: ``POST /<script>/<run>/v1/chat/completions``, where ``<run>``
is any token unique to one agent run. The stub counts the requests of each run, so request
``i`` of a run gets reply ``i`` of its script, and it never parses a request body:

- ``tools-K``: K rounds of one ``lookup`` tool call (arguments ``{"n": i}``), then the answer;
- ``parallel``: one reply of ``PARALLEL_CALLS`` calls to ``wait``, then the answer;
- a ``-sse`` suffix streams the same replies as server-sent events.

Every answer is bytes computed at start-up. A run whose id starts with ``check`` also has
the sha256 of each request body kept, read back with ``GET /digests/<run>``: the benchmark
uses it to prove that a floor sends exactly the bytes plainagent sends.
"""

import hashlib
import json
import re
import subprocess
import sys
import threading
import urllib.request
from http.server import ThreadingHTTPServer
from pathlib import Path
from socketserver import StreamRequestHandler
from typing import Any

from workload import MODEL

ANSWER = "The lookups are done: every record was found, and nothing else needs doing now."
MAX_ROUNDS = 600  # a 1,000-message run needs 499 rounds
PARALLEL_CALLS = 8
MAX_SECONDS = 900.0
MAX_REQUESTS = 200_000
NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


def completion(message: dict, finish_reason: str) -> dict:
    """Return a ``chat.completion`` body holding one choice."""
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 0,
        "model": MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
    }


def tool_calls_message(name: str, numbers: range) -> dict:
    """Return an assistant message calling ``name`` once for each ``n`` in ``numbers``."""
    calls = [
        {"id": f"call_{n}", "type": "function", "function": {"name": name, "arguments": json.dumps({"n": n})}}
        for n in numbers
    ]
    return {"role": "assistant", "content": None, "tool_calls": calls}


def sse_events(body: dict) -> list[dict]:
    """Return the ``chat.completion.chunk`` events a server streams for ``body``: text word by
    word, each tool call as its name and then its arguments in two pieces, then usage."""
    message, head = (
        body["choices"][0]["message"],
        {"id": body["id"], "object": "chat.completion.chunk", "created": 0, "model": MODEL},
    )
    deltas: list[dict] = [{"role": "assistant", "content": ""}]
    deltas += [{"content": word} for word in re.findall(r"\S+\s*", message["content"] or "")]
    for index, call in enumerate(message.get("tool_calls") or []):
        arguments = call["function"]["arguments"]
        half = len(arguments) // 2
        deltas.append(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["function"]["name"], "arguments": ""},
                    }
                ]
            }
        )
        for piece in (arguments[:half], arguments[half:]):
            deltas.append({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    events = [dict(head, choices=[{"index": 0, "delta": delta, "finish_reason": None}]) for delta in deltas]
    events.append(dict(head, choices=[{"index": 0, "delta": {}, "finish_reason": body["choices"][0]["finish_reason"]}]))
    events.append(dict(head, choices=[], usage=body["usage"]))
    return events


def http_response(body: Any, stream: bool) -> bytes:
    """Return the whole HTTP response for ``body``: JSON with a length, or a chunked event stream."""
    if not stream:
        data = json.dumps(body).encode()
        head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n".encode()
        return head + b"Connection: close\r\n\r\n" + data
    events = [f"data: {json.dumps(event)}\n\n".encode() for event in sse_events(body)] + [b"data: [DONE]\n\n"]
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(event), event) for event in events) + b"0\r\n\r\n"
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
    return head + b"Connection: close\r\n\r\n" + chunks


def precompute() -> dict:
    """Return every reply as bytes: ``{(script, stream): [reply 0, reply 1, ...]}``; the last is the answer."""
    answer = completion({"role": "assistant", "content": ANSWER}, "stop")
    rounds = [completion(tool_calls_message("lookup", range(i, i + 1)), "tool_calls") for i in range(MAX_ROUNDS)]
    parallel = completion(tool_calls_message("wait", range(PARALLEL_CALLS)), "tool_calls")
    replies = {}
    for stream in (False, True):
        replies["tools", stream] = [http_response(body, stream) for body in rounds] + [http_response(answer, stream)]
        replies["parallel", stream] = [http_response(parallel, stream), http_response(answer, stream)]
    return replies


class Handler(StreamRequestHandler):
    """Reads a request line, headers and body, and writes a precomputed answer.

    Not ``BaseHTTPRequestHandler``: its header parsing (the email package) would add server
    time to every request, and the stub must not be what the benchmark measures.
    """

    def handle(self) -> None:
        server: StubServer = self.server  # type: ignore[assignment]
        method, path, *_ = self.rfile.readline(65536).decode("latin-1").split(" ")
        length = 0
        while (line := self.rfile.readline(65536)) not in (b"\r\n", b"\n", b""):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        self.wfile.write(server.answer(method, path, self.rfile.read(length)))


class StubServer(ThreadingHTTPServer):
    """The stub's HTTP server: per-run request counts, and the digests of ``check`` runs."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.replies = precompute()
        self.counts: dict[str, int] = {}  # run -> requests answered
        self.digests: dict[str, list[str]] = {}  # check run -> sha256 of each request body
        self.lock, self.stopping, self.answered = threading.Lock(), threading.Event(), 0

    def answer(self, method: str, path: str, body: bytes) -> bytes:
        """Return the reply for one request (an HTTP 404 for a URL no script matches)."""
        parts = path.strip("/").split("/")
        if method == "GET" and len(parts) == 2 and parts[0] == "digests":
            return http_response(self.digests.get(parts[1], []), stream=False)
        if len(parts) < 2:
            return NOT_FOUND
        stream = parts[0].endswith("-sse")
        script, _, rounds = parts[0].removesuffix("-sse").partition("-")
        with self.lock:
            self.answered += 1
            if self.answered >= MAX_REQUESTS:
                self.stopping.set()
            number = self.counts[parts[1]] = self.counts.get(parts[1], -1) + 1
            if parts[1].startswith("check"):
                self.digests.setdefault(parts[1], []).append(hashlib.sha256(body).hexdigest())
        if script == "tools" and rounds.isdigit():
            replies = self.replies["tools", stream]
            return replies[number] if number < min(int(rounds), MAX_ROUNDS) else replies[-1]
        if script == "parallel":
            return self.replies["parallel", stream][min(number, 1)]
        return NOT_FOUND


class Stub:
    """The stub in its own process, as a context manager; ``url(script, run)`` is a client's base URL."""

    def __enter__(self) -> "Stub":
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__))], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.port = int(self.process.stdout.readline())  # type: ignore[union-attr]
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.process.stdin.close()  # type: ignore[union-attr]  # the stub stops when its stdin closes
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def url(self, script: str, run: str) -> str:
        """Return the base URL (ending in ``/v1``) for one run of ``script``."""
        return f"http://127.0.0.1:{self.port}/{script}/{run}/v1"

    def digests(self, run: str) -> list:
        """Return the sha256 digests of the request bodies of a ``check`` run."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/digests/{run}", timeout=10) as response:
            return json.loads(response.read())


def main() -> None:
    server = StubServer()
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    print(server.server_port, flush=True)

    def stop_when_stdin_closes() -> None:
        sys.stdin.read()
        server.stopping.set()

    threading.Thread(target=stop_when_stdin_closes, daemon=True).start()
    server.stopping.wait(MAX_SECONDS)
    server.shutdown()
    server.server_close()


if __name__ == "__main__":
    main()
