"""Every request body shape the client builds fits OpenAI's published request schema.

The schema is ``openai-spec/request.schema.json`` in the conformance corpus directory
(``$PLAINAGENT_CONFORMANCE_DIR``, else ``<repo>/../shared/conformance``), derived from
openai/openai-openapi. Bodies are also checked with the corpus's ``validate.py --strict``,
which refuses any key the spec does not declare. Real bodies are checked too: every request
recorded in ``cassettes/``, and every request the HTTP and streaming tests send to their
loopback servers.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from llm_client import LlmClient, LlmRequest
from loopback import LoopbackServer, Reply, sse_pieces
from messages import Message, ToolCall, ToolResult
from tools import tool

jsonschema = pytest.importorskip(
    "jsonschema", reason="jsonschema is not installed: pip install -r requirements-dev.txt"
)

PROJECT = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = PROJECT.parent / "shared" / "conformance"
SPEC = Path(os.environ.get("PLAINAGENT_CONFORMANCE_DIR") or DEFAULT_CORPUS) / "openai-spec"

if not (SPEC / "request.schema.json").is_file():
    pytest.skip(f"no {SPEC / 'request.schema.json'} (set PLAINAGENT_CONFORMANCE_DIR)", allow_module_level=True)

VALIDATOR = jsonschema.Draft202012Validator(json.loads((SPEC / "request.schema.json").read_text(encoding="utf-8")))


@tool
def get_weather(city: str, unit: str = "celsius") -> str:
    """Get the weather for a city.

    Args:
        city: The city name.
        unit: celsius or fahrenheit.
    """
    return "sunny"


QUESTION = Message("user", "Weather in Paris?")
CALL = ToolCall("call_1", "get_weather", {"city": "Paris"})
SHAPES = {
    "plain": LlmRequest(["Be brief."], [QUESTION]),
    "with-tools": LlmRequest(contents=[QUESTION], tools=[get_weather]),
    "tool-choice-auto": LlmRequest(contents=[QUESTION], tools=[get_weather], tool_choice="auto"),
    "tool-choice-none": LlmRequest(contents=[QUESTION], tools=[get_weather], tool_choice="none"),
    "tool-choice-required": LlmRequest(contents=[QUESTION], tools=[get_weather], tool_choice="required"),
    "tool-choice-named": LlmRequest(contents=[QUESTION], tools=[get_weather], tool_choice="get_weather"),
    "tool-calls-only": LlmRequest(
        contents=[QUESTION, CALL, ToolCall("call_2", "get_weather", {"city": "Rome"})], tools=[get_weather]
    ),
    "reasoning-sent-back": LlmRequest(
        contents=[QUESTION, Message("assistant", "", reasoning_content="Look it up."), CALL], tools=[get_weather]
    ),
    "text-and-tool-calls": LlmRequest(
        contents=[QUESTION, Message("assistant", "Checking."), CALL], tools=[get_weather]
    ),
    "tool-results": LlmRequest(
        contents=[QUESTION, CALL, ToolResult("call_1", "get_weather", "sunny"), Message("assistant", "Sunny.")],
        tools=[get_weather],
    ),
    "raw-arguments": LlmRequest(
        contents=[
            QUESTION,
            ToolCall.from_arguments_text("call_1", "get_weather", '{"ci'),
            ToolResult("call_1", "get_weather", "bad arguments", is_error=True),
        ],
        tools=[get_weather],
    ),
}


def body_of(shape: str, stream: bool = False, **config) -> dict:
    client = LlmClient("gpt-4o", "http://127.0.0.1:9/v1", "sk-schema-test", **config)
    return client._build_body(SHAPES[shape], stream=stream)


def schema_errors(body: dict) -> list:
    return [f"{list(error.absolute_path)}: {error.message}" for error in VALIDATOR.iter_errors(body)]


def strict_errors(body: dict) -> str:
    """Run the corpus's validate.py --strict on a body; return its complaints ("" when it prints ok)."""
    result = subprocess.run(
        [sys.executable, str(SPEC / "validate.py"), "--strict", "request", "-"],
        input=json.dumps(body),
        capture_output=True,
        text=True,
        timeout=60,
    )
    return "" if result.stdout.strip() == "ok" else result.stdout + result.stderr


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_request_body_fits_the_schema(shape):
    assert schema_errors(body_of(shape)) == []


def test_a_streaming_body_with_stream_options_fits_the_schema():
    assert schema_errors(body_of("with-tools", stream=True)) == []


def test_a_body_with_config_passed_through_fits_the_schema():
    config = {
        "temperature": 0.2,
        "top_p": 0.9,
        "seed": 7,
        "max_completion_tokens": 256,
        "parallel_tool_calls": False,
        "response_format": {"type": "json_object"},
    }
    assert schema_errors(body_of("tool-choice-auto", **config)) == []


@pytest.mark.parametrize("shape", ["tool-calls-only", "tool-results", "raw-arguments"])
def test_request_body_declares_no_key_the_spec_does_not_know(shape):
    assert strict_errors(body_of(shape, stream=True)) == ""


def test_the_body_sent_over_http_fits_the_schema():
    with LoopbackServer([Reply(pieces=sse_pieces(), content_type="text/event-stream")]) as server:
        client = LlmClient("gpt-4o", server.base_url, "sk-schema-test", temperature=0)
        client.generate(SHAPES["tool-results"], on_text=lambda piece: None)
    assert schema_errors(server.requests[0].body) == []


def test_every_request_body_recorded_in_the_cassettes_fits_the_schema():
    yaml = pytest.importorskip("yaml", reason="PyYAML (a vcrpy dependency) is not installed")
    bodies = {
        f"{path.stem}[{number}]": json.loads(interaction["request"]["body"])
        for path in sorted((PROJECT / "cassettes").glob("*.yaml"))
        for number, interaction in enumerate(yaml.safe_load(path.read_text(encoding="utf-8"))["interactions"])
    }
    assert bodies, "no cassettes found"
    assert {name: schema_errors(body) for name, body in bodies.items() if schema_errors(body)} == {}


# Runs the HTTP and streaming tests in a child pytest whose LoopbackServer also writes down
# every body it receives: argv[1] is the file for them, the rest are the test files.
COLLECT_BODIES = """
import json, sys
import pytest
import loopback
received = []
answer = loopback.LoopbackServer.next_reply
loopback.LoopbackServer.next_reply = lambda server, request: received.append(request.body) or answer(server, request)
code = pytest.main(["-q", "-p", "no:cacheprovider", *sys.argv[2:]])
with open(sys.argv[1], "w", encoding="utf-8") as out:
    json.dump(received, out)
sys.exit(code)
"""


def test_every_body_the_http_and_streaming_tests_send_fits_the_schema(tmp_path):
    out = tmp_path / "bodies.json"
    done = subprocess.run(
        [sys.executable, "-c", COLLECT_BODIES, str(out), "tests/test_llm_client_http.py", "tests/test_streaming.py"],
        cwd=PROJECT,
        env={**os.environ, "PYTHONPATH": "tests"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    bodies = {json.dumps(body, sort_keys=True): body for body in json.loads(out.read_text(encoding="utf-8"))}
    assert bodies, done.stdout[-2000:]
    assert {text: schema_errors(body) for text, body in bodies.items() if schema_errors(body)} == {}
