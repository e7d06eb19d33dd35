"""Faults on the wire: every one ends in a retry or an ``error_message``, never an exception.

One loopback server plays each fault a real server or proxy produces: 429 with
``Retry-After``, 500, 503, a connection reset before any answer, an answer that never comes
(the client's timeout fires), a body cut short of its ``Content-Length``, an HTML page, an
empty body, a 200 with ``choices: []``, and for streams a stream cut, reset or stalled
midway. A fault before the response begins is retried at most ``max_retries`` times; a fault
in a response that has begun (HTTP 200) is reported at once. Waits are recorded by an
injected ``sleep``, never slept; attempts are counted by the server.
"""

import random
import threading

import pytest

from llm_client import LlmClient, LlmRequest, LlmResponse
from loopback import LoopbackServer, Reply, chat_completion, sse_pieces
from messages import Message

REQUEST = LlmRequest(contents=[Message("user", "Hi")])
TIMEOUT = 0.2  # the client's timeout, so a stalled server costs little
HELLO = chat_completion("Hello!")
PAGE = "<html><head><title>Sign in</title></head><body><h1>Sign in to the Wi-Fi</h1></body></html>"


def chunk(content: str, finish_reason=None) -> dict:
    return {
        "id": "chatcmpl-s",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish_reason}],
    }


def event_stream(pieces: list, **options) -> Reply:
    return Reply(pieces=pieces, content_type="text/event-stream", **options)


def answer(is_stream: bool) -> Reply:
    """A good reply saying "Hello!", plain or streamed."""
    return event_stream(sse_pieces(chunk("Hel"), chunk("lo!", "stop"))) if is_stream else Reply(body=HELLO)


# Faults before the response begins: retried. name: (reply maker, wait asked for, error once retries run out)
TRANSIENT = {
    "429 with Retry-After": (
        lambda: Reply(429, {"error": {"message": "Rate limit reached"}}, headers={"Retry-After": "2"}),
        2.0,
        "HTTP 429: Rate limit reached",
    ),
    "500": (
        lambda: Reply(500, {"error": {"message": "The server had an error"}}),
        None,
        "HTTP 500: The server had an error",
    ),
    "503": (lambda: Reply(503, b"", content_type=None), None, "HTTP 503: Service Unavailable"),
    "reset before answering": (
        lambda: Reply(ending="drop"),
        None,
        "no answer from the server: [Errno 104] Connection reset by peer",
    ),
    "stalled before answering": (
        lambda: Reply(body=HELLO, hold=threading.Event()),
        None,
        "no answer from the server: timed out",
    ),
}

# Faults in a plain response that has begun: reported at once. name: (reply maker, error)
BROKEN = {
    "body cut in half": (
        lambda: Reply(body=HELLO, ending="cut"),
        "response body broken off: IncompleteRead(95 bytes read, 96 more expected)",
    ),
    "HTML page": (
        lambda: Reply(body=PAGE, content_type="text/html"),
        "response is not JSON: Sign in Sign in to the Wi-Fi",
    ),
    "empty body": (lambda: Reply(body=b""), "the server sent an empty body"),
    "no choices": (lambda: Reply(body={"id": "chatcmpl-1", "choices": []}), "response has no choices"),
}

# Faults in a stream that has begun: reported at once, keeping the text that came.
# name: (reply maker given the event set once text reached on_text, error, text kept)
BROKEN_STREAM = {
    "stream cut": (
        lambda text_seen: event_stream(sse_pieces(chunk("Hel"), done=False), ending="cut"),
        "stream broken off: IncompleteRead(0 bytes read)",
        "Hel",
    ),
    "stream reset": (
        lambda text_seen: event_stream(sse_pieces(chunk("Hel"), done=False), gates={1: text_seen}, ending="reset"),
        "stream broken off: [Errno 104] Connection reset by peer",
        "Hel",
    ),
    "stream stalled": (
        lambda text_seen: event_stream(sse_pieces(chunk("Hel"), chunk("lo!")), gates={1: threading.Event()}),
        "stream broken off: timed out",
        "Hel",
    ),
    "HTML page": (
        lambda text_seen: Reply(body=PAGE, content_type="text/html"),
        "the stream held no events: Sign in Sign in to the Wi-Fi",
        "",
    ),
    "no choices": (
        lambda text_seen: event_stream(sse_pieces({"id": "chatcmpl-s", "choices": []})),
        "response has no choices",
        "",
    ),
}


@pytest.fixture(autouse=True)
def fixed_jitter(monkeypatch):
    """Backoff jitter at its midpoint, so the waits are known: 0.75 s, then 1.5 s."""
    monkeypatch.setattr(random, "random", lambda: 0.5)


class Caller:
    """One client on one server; ``call`` makes one request, ``sleeps`` records every wait."""

    def __init__(self, server: LoopbackServer, max_retries: int = 2) -> None:
        self.sleeps: list = []
        self.client = LlmClient(
            "m", server.base_url, "sk-fault-test", timeout=TIMEOUT, max_retries=max_retries, sleep=self.sleeps.append
        )

    def call(self, is_stream: bool, text_seen: threading.Event) -> LlmResponse:
        on_text = (lambda piece: text_seen.set()) if is_stream else None
        return self.client.generate(REQUEST, on_text=on_text)


@pytest.mark.parametrize("is_stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("fault", TRANSIENT)
def test_a_fault_before_the_response_is_retried_and_the_next_attempt_succeeds(fault, is_stream):
    make, wait, _ = TRANSIENT[fault]
    with LoopbackServer([make(), answer(is_stream)]) as server:
        caller = Caller(server)
        response = caller.call(is_stream, threading.Event())
    assert (response.text, response.error_message, len(server.requests)) == ("Hello!", None, 2)
    assert caller.sleeps == [0.75 if wait is None else wait]


@pytest.mark.parametrize("is_stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("fault", TRANSIENT)
def test_a_fault_before_the_response_that_persists_ends_in_its_error_after_max_retries(fault, is_stream):
    make, wait, error = TRANSIENT[fault]
    with LoopbackServer([make() for _ in range(4)]) as server:
        caller = Caller(server, max_retries=2)
        response = caller.call(is_stream, threading.Event())
    assert (response.error_message, response.content, len(server.requests)) == (error, [], 3)
    assert caller.sleeps == ([0.75, 1.5] if wait is None else [wait, wait])


@pytest.mark.parametrize("fault", BROKEN)
def test_a_fault_in_a_begun_response_is_an_error_and_never_asked_again(fault):
    make, error = BROKEN[fault]
    with LoopbackServer([make(), answer(False)]) as server:
        caller = Caller(server)
        response = caller.call(False, threading.Event())
    assert (response.error_message, response.status_code, response.content) == (error, 200, [])
    assert (len(server.requests), caller.sleeps) == (1, [])


@pytest.mark.parametrize("fault", BROKEN_STREAM)
def test_a_fault_in_a_begun_stream_is_an_error_that_keeps_the_text_and_is_never_asked_again(fault):
    make, error, text = BROKEN_STREAM[fault]
    text_seen = threading.Event()
    with LoopbackServer([make(text_seen), answer(True)]) as server:
        caller = Caller(server)
        response = caller.call(True, text_seen)
    assert (response.error_message, response.status_code, response.text) == (error, 200, text)
    assert (len(server.requests), caller.sleeps) == (1, [])


def test_every_fault_in_turn_through_one_client_costs_at_most_max_retries_plus_one_attempts():
    calls = []  # (is_stream, event set once text reached on_text, replies, expected error)
    for is_stream in (False, True):
        for make, _, error in TRANSIENT.values():
            calls.append((is_stream, threading.Event(), [make() for _ in range(3)], error))
    for make, error in BROKEN.values():
        calls.append((False, threading.Event(), [make()], error))
    for make, error, _ in BROKEN_STREAM.values():
        text_seen = threading.Event()
        calls.append((True, text_seen, [make(text_seen)], error))
    with LoopbackServer([reply for _, _, replies, _ in calls for reply in replies]) as server:
        caller = Caller(server, max_retries=2)
        errors = [caller.call(is_stream, text_seen).error_message for is_stream, text_seen, _, _ in calls]
    assert errors == [error for _, _, _, error in calls]
    # 10 transient faults tried 3 times each, 9 broken responses once each: 39 attempts, 20 waits
    assert (len(server.requests), len(caller.sleeps)) == (39, 20)


def test_an_empty_stream_is_asked_for_again_unstreamed_and_its_text_handed_over_once():
    """llama-cpp-python's server answers a streamed "auto" tool call with an empty 200 stream."""
    pieces: list = []
    with LoopbackServer([event_stream([]), Reply(body=HELLO)]) as server:
        client = LlmClient("m", server.base_url, "sk-fault-test", max_retries=2, sleep=lambda seconds: None)
        response = client.generate(REQUEST, on_text=pieces.append)
    assert (response.error_message, response.text, pieces) == (None, "Hello!", ["Hello!"])
    assert [request.body.get("stream") for request in server.requests] == [True, None]


def test_an_empty_stream_that_stays_empty_unstreamed_too_is_reported():
    with LoopbackServer([event_stream([]), Reply(body="")]) as server:
        client = LlmClient("m", server.base_url, "sk-fault-test", max_retries=1)
        response = client.generate(REQUEST, on_text=lambda piece: None)
    assert (response.error_message, len(server.requests)) == ("the server sent an empty body", 2)


def test_the_unstreamed_ask_after_an_empty_stream_counts_against_max_retries():
    unavailable = [Reply(503, {"error": {"message": "busy"}}) for _ in range(3)]
    with LoopbackServer([event_stream([]), *unavailable]) as server:
        client = LlmClient("m", server.base_url, "sk-fault-test", max_retries=2, sleep=lambda seconds: None)
        response = client.generate(REQUEST, on_text=lambda piece: None)
    assert (response.error_message, len(server.requests)) == ("HTTP 503: busy", 3)


def test_with_no_retries_an_empty_stream_is_reported_and_not_asked_again():
    with LoopbackServer([event_stream([]), Reply(body=HELLO)]) as server:
        client = LlmClient("m", server.base_url, "sk-fault-test", max_retries=0)
        response = client.generate(REQUEST, on_text=lambda piece: None)
    assert (response.error_message, len(server.requests)) == ("the stream was empty", 1)
