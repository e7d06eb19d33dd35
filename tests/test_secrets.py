"""Nothing leaked: the API key reaches the server and nothing else, whatever the server does.

One recognisable fake key goes through every path: answers, HTTP errors (servers that
echo the key back, as JSON, as an HTML page, cut at the quote limit), retries, streams
(broken, and with an error that echoes the key), timeouts, a stopped agent, the command
line with the key in the environment or named by a spec, its transcripts and its output.
Everything produced is searched for the key and for any 12 characters of it in a row. Each
test also checks the key did reach the server, so a pass is not for want of a key.
"""

import json
import subprocess
import threading
import traceback

import pytest

from agent import DEMO_TOOLS, AgentLauncher, AgentStopped, LlmCall
from llm_client import LlmClient, LlmRequest, LlmResponse
from loopback import LoopbackServer, Reply, agent_cli, chat_completion, sse_pieces
from messages import Message

KEY = "sk-plainagent-FAKE-KEY-0123456789abcdef"
PIECES = {KEY[start : start + 12] for start in range(len(KEY) - 11)}  # "sk-plain", as OpenAI shows a key, is fine
BEARER = f"Bearer {KEY}"
REQUEST = LlmRequest(contents=[Message("user", "Hi")])
WAIT_SECONDS = 60.0  # only a broken test waits this long


def leaks(*texts: str) -> list[str]:
    """The texts that hold the key, or any 12 characters of it in a row."""
    return [text for text in texts if any(piece in text for piece in PIECES)]


def key_reached(server: LoopbackServer) -> bool:
    """True when the server got requests and every one carried the key."""
    return bool(server.requests) and {request.headers.get("authorization") for request in server.requests} == {BEARER}


def chunk(content: str) -> dict:
    return {"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}]}


def stream(pieces: list, **options) -> Reply:
    return Reply(pieces=pieces, content_type="text/event-stream", **options)


ECHO_PAGE = f"<html><body><h1>401</h1><p>Header Authorization: Bearer {KEY} was refused.</p></body></html>"

# name: (what the server answers, built fresh for each test; whether the call streams)
CALLS = {
    "a plain answer": (lambda: [Reply(body=chat_completion("Hello!"))], False),
    "a streamed answer": (lambda: [stream(sse_pieces(chunk("Hel"), chunk("lo!")))], True),
    "401 echoing the key": (lambda: [Reply(401, {"error": {"message": f"Incorrect API key provided: {KEY}."}})], False),
    "an HTML page echoing the key": (lambda: [Reply(401, ECHO_PAGE, content_type="text/html")], False),
    "an echo cut at the quote limit inside the key": (
        lambda: [Reply(400, "x" * 480 + KEY + " is not valid", content_type="text/plain")],
        False,
    ),
    "an error object in a 200 echoing the key": (
        lambda: [Reply(body={"error": {"message": f"{KEY} is over quota"}})],
        False,
    ),
    "503s echoing the key until retries run out": (
        lambda: [Reply(503, {"error": {"message": f"busy; retry with {KEY}"}})] * 3,
        False,
    ),
    "a stream broken off": (lambda: [stream(sse_pieces(chunk("Hel"), done=False), ending="cut")], True),
    "an error chunk in the stream echoing the key": (
        lambda: [stream(sse_pieces(chunk("Hel"), {"error": {"message": f"upstream refused {KEY}"}}))],
        True,
    ),
    "an error event echoing the key": (
        lambda: [stream([f'event: error\ndata: {{"error": {{"message": "bad key {KEY}"}}}}\n\n'])],
        True,
    ),
    "stream data echoing the key that is not JSON": (lambda: [stream([f"data: {BEARER} refused\n\n"])], True),
    "a server that never answers": (lambda: [Reply(body=chat_completion("Hi"), hold=threading.Event())] * 3, False),
    "a stream that stalls": (
        lambda: [stream(sse_pieces(chunk("Hel"), chunk("lo!")), gates={1: threading.Event()})],
        True,
    ),
}


@pytest.mark.parametrize("name", CALLS)
def test_the_key_appears_in_nothing_a_call_gives_back(name):
    make, is_stream = CALLS[name]
    pieces: list = []
    with LoopbackServer(make()) as server:
        client = LlmClient("m", server.base_url, KEY, timeout=0.2, sleep=lambda seconds: None)
        response = client.generate(REQUEST, on_text=pieces.append if is_stream else None)
    assert key_reached(server)
    assert leaks(repr(response), str(response.error_message), repr(client), *pieces) == []


def test_an_echoed_key_is_replaced_by_a_marker_in_the_error_message():
    with LoopbackServer(CALLS["401 echoing the key"][0]()) as server:
        response = LlmClient("m", server.base_url, KEY, max_retries=0).generate(REQUEST)
    assert (key_reached(server), response) == (
        True,
        LlmResponse(error_message="HTTP 401: Incorrect API key provided: [redacted].", status_code=401),
    )


def test_an_echo_cut_inside_the_key_loses_the_part_of_the_key_before_the_cut():
    with LoopbackServer(CALLS["an echo cut at the quote limit inside the key"][0]()) as server:
        response = LlmClient("m", server.base_url, KEY, max_retries=0).generate(REQUEST)
    assert (key_reached(server), response.error_message) == (True, "HTTP 400: " + "x" * 480 + "[redacted]...")


def test_an_agent_stopped_by_a_server_echoing_the_key_shows_it_nowhere(monkeypatch):
    monkeypatch.setenv("PLAINAGENT_SECRETS_KEY", KEY)
    with LoopbackServer(CALLS["401 echoing the key"][0]()) as server:
        launcher = AgentLauncher(DEMO_TOOLS)
        spec = {"task": "Hi.", "base_url": server.base_url, "api_key_env": "PLAINAGENT_SECRETS_KEY"}
        with pytest.raises(AgentStopped) as raised:
            launcher.launch(spec)
    stopped = raised.value
    shown = [
        str(stopped),
        repr(stopped),
        stopped.detail,
        repr(stopped.conversation),
        repr(stopped.partial),
        "".join(traceback.format_exception(stopped)),
        repr(launcher),
    ]
    assert (key_reached(server), stopped.reason, leaks(*shown)) == (True, "llm_error", [])


def test_the_reprs_of_client_llm_call_launcher_and_response_hold_no_key():
    client = LlmClient("m", "http://127.0.0.1:9/v1", KEY, headers={"api-key": KEY})
    shown = [
        repr(client),
        repr(LlmCall(client)),
        repr(AgentLauncher(DEMO_TOOLS, client=client)),
        repr(LlmResponse(error_message="HTTP 401: [redacted]", status_code=401)),
    ]
    assert leaks(*shown) == []


@pytest.mark.parametrize("stray", ["\n", "\r\n", "\x00"], ids=["newline", "crlf", "nul"])
def test_a_key_with_a_stray_control_character_is_refused_without_being_shown(stray):
    # a key read from a file keeps its newline; the HTTP library's error would quote the header
    with pytest.raises(ValueError) as raised:
        LlmClient("m", "http://127.0.0.1:9/v1", KEY + stray)
    assert leaks(str(raised.value), "".join(traceback.format_exception(raised.value))) == []


# --- the command line --------------------------------------------------------------------

SCRIPT = [chat_completion(tool_calls=[("call_1", "calculator", {"expression": "6 * 7"})]), chat_completion("42.")]


def run_cli(script: list, *arguments: str, **env: str) -> tuple[subprocess.CompletedProcess, LoopbackServer]:
    """Run ``python agent.py`` against a server answering with ``script``; return the run and the server."""
    with LoopbackServer(script) as server:
        arguments = tuple(argument.replace("{base_url}", server.base_url) for argument in arguments)
        done = subprocess.run(**agent_cli(*arguments, **env), capture_output=True, text=True, timeout=WAIT_SECONDS)
    return done, server


def test_a_cli_run_writes_the_key_in_neither_its_transcript_nor_its_output(tmp_path):
    transcript = tmp_path / "run.jsonl"
    done, server = run_cli(
        [Reply(body=body) for body in SCRIPT],
        "--base-url",
        "{base_url}",
        "--model",
        "m",
        "--transcript",
        str(transcript),
        "What is 6 * 7?",
        OPENAI_API_KEY=KEY,
    )
    assert (done.returncode, key_reached(server)) == (0, True)
    assert leaks(transcript.read_text(encoding="utf-8"), done.stdout, done.stderr) == []


def test_a_cli_run_stopped_by_a_server_echoing_the_key_shows_it_nowhere(tmp_path):
    transcript = tmp_path / "run.jsonl"
    done, server = run_cli(
        CALLS["401 echoing the key"][0](),
        "--base-url",
        "{base_url}",
        "--model",
        "m",
        "--transcript",
        str(transcript),
        "Hi.",
        OPENAI_API_KEY=KEY,
    )
    assert (done.returncode, key_reached(server), "[redacted]" in done.stderr) == (1, True, True)
    assert leaks(transcript.read_text(encoding="utf-8"), done.stdout, done.stderr) == []


def write_spec(tmp_path, base_url: str):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"task": "What is 6 * 7?", "base_url": base_url, "api_key_env": "PLAINAGENT_KEY"}))
    return path


def test_a_spec_names_the_key_variable_and_its_transcript_holds_the_name_not_the_key(tmp_path):
    transcript = tmp_path / "run.jsonl"
    with LoopbackServer([Reply(body=body) for body in SCRIPT]) as server:
        spec = write_spec(tmp_path, server.base_url)
        done = subprocess.run(
            **agent_cli("--spec", str(spec), "--transcript", str(transcript), PLAINAGENT_KEY=KEY),
            capture_output=True,
            text=True,
            timeout=WAIT_SECONDS,
        )
    header = json.loads(transcript.read_text(encoding="utf-8").splitlines()[0])
    assert (done.returncode, key_reached(server), header["settings"]["spec"]["api_key_env"]) == (
        0,
        True,
        "PLAINAGENT_KEY",
    )
    assert leaks(transcript.read_text(encoding="utf-8"), spec.read_text(), done.stdout, done.stderr) == []


def test_a_resumed_run_reads_the_key_from_the_environment_again_and_writes_it_nowhere(tmp_path):
    transcript = tmp_path / "run.jsonl"
    with LoopbackServer([Reply(body=body) for body in SCRIPT]) as server:
        spec = write_spec(tmp_path, server.base_url)
        subprocess.run(
            **agent_cli("--spec", str(spec), "--transcript", str(transcript), PLAINAGENT_KEY=KEY),
            capture_output=True,
            timeout=WAIT_SECONDS,
        )
    done, server = run_cli(
        [Reply(body=chat_completion("Still 42."))],
        "--resume",
        str(transcript),
        "--base-url",
        "{base_url}",
        "And now?",
        PLAINAGENT_KEY=KEY,
    )
    assert (done.returncode, key_reached(server)) == (0, True)
    assert leaks(transcript.read_text(encoding="utf-8"), done.stdout, done.stderr) == []


def test_a_cli_run_with_a_stray_newline_in_the_key_shows_no_part_of_it(tmp_path):
    done, server = run_cli(
        [Reply(body=chat_completion("Hi."))],
        "--base-url",
        "{base_url}",
        "--model",
        "m",
        "Hi.",
        OPENAI_API_KEY=KEY + "\n",
    )
    assert (done.returncode, leaks(done.stdout, done.stderr)) == (2, [])
    assert done.stderr.startswith("agent.py: error: ") and "Traceback" not in done.stderr


def test_a_key_given_in_the_base_urls_place_is_refused_without_being_shown():
    with pytest.raises(ValueError) as raised:
        LlmClient("gpt-4o", KEY)
    assert leaks(str(raised.value)) == []


def test_a_key_with_a_pasted_curly_quote_is_refused_without_being_shown():
    # a key copied from a document may end in a typographic quote, which no HTTP header can carry
    with pytest.raises(ValueError) as raised:
        LlmClient("m", "http://127.0.0.1:9/v1", KEY + "\u201d")
    assert leaks(str(raised.value), "".join(traceback.format_exception(raised.value))) == []


def test_a_key_sent_in_its_own_header_goes_there_alone_and_is_redacted_from_echoes():
    echo = Reply(401, {"error": {"message": f"bad key {KEY}"}})
    with LoopbackServer([echo]) as server:
        client = LlmClient("m", server.base_url, KEY, api_key_header="X-Subscription")
        response = client.generate(LlmRequest(contents=[Message("user", "Hi")]))
    headers = server.requests[0].headers
    assert (headers.get("x-subscription"), "authorization" in headers) == (KEY, False)
    assert response.error_message == "HTTP 401: bad key [redacted]"
