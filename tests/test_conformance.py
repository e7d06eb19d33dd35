"""Replay every case of the shared conformance corpus through LlmClient and compare with ``expected``.

Each case's recorded response (status, content type, body) is served from the loopback
server; the client makes its call (streaming when the recorded request streamed), and its
``LlmResponse`` is mapped to the corpus's ``expected`` shape. ``DIFFERENCES`` lists the
cases where our answer deliberately differs from ``expected``, why, and what we return
instead. The corpus lives in ``$PLAINAGENT_CONFORMANCE_DIR``, else ``<repo>/../shared/conformance``.
"""

import json
import os
from pathlib import Path

import pytest

from llm_client import LlmClient, LlmRequest, LlmResponse
from loopback import LoopbackServer, Reply
from messages import Message

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "conformance"
CORPUS = Path(os.environ.get("PLAINAGENT_CONFORMANCE_DIR") or DEFAULT_CORPUS)
CASE_FILES = sorted((CORPUS / "cases").glob("*.json"))

if not CASE_FILES:
    pytest.skip(f"no conformance cases in {CORPUS / 'cases'} (set PLAINAGENT_CONFORMANCE_DIR)", allow_module_level=True)

pytestmark = pytest.mark.conformance

BLANK_ARGUMENTS = (
    "blank or absent tool-call arguments mean no arguments: ToolCall.arguments is {}, the value a tool runs with"
)
GENERATED_ID = (
    "a tool call sent without an id gets an id made from a hash of the response, so its ToolResult "
    "can be matched to it and a replay gives the same id"
)

DIFFERENCES = {
    "cloudflare__content-is-object": (
        "content that is an object becomes its JSON text: a Message holds a str, and the JSON text "
        "keeps every field the model wrote, where a dropped object or str(dict) would not",
        {"text": '{"title": "Apples are tasty", "author": "Hadley Wickham"}'},
    ),
    "databricks__sse-tool-call-empty-string-args": (
        BLANK_ARGUMENTS,
        {
            "tool_calls": [{"id": "toolu_bdrk_01TPK8QRAHByJ1TANL9PDZQK", "name": "get_date", "arguments": {}}],
        },
    ),
    "openrouter__tool-call-missing-arguments": (
        BLANK_ARGUMENTS,
        {
            "tool_calls": [
                {"id": "toolu_vrtx_015QAXScZzRDPttiPoc34AdD", "name": "find_education_content", "arguments": {}}
            ],
        },
    ),
    "gemini-openai-compat__tool-call-no-id": (
        GENERATED_ID,
        {
            "tool_calls": [{"id": "call_73192b411748_0", "name": "get_current_time", "arguments": {}}],
        },
    ),
    "gemini-openai-compat__sse-tool-call-no-id": (
        GENERATED_ID,
        {
            "tool_calls": [{"id": "call_2103c40011d1_0", "name": "return_bool", "arguments": {"value": True}}],
        },
    ),
}


def observed(response: LlmResponse, kind: str) -> dict:
    """Map our response to the corpus's ``expected`` shape."""
    if kind == "error":
        return {"status": response.status_code, "message": response.error_message}
    shape = {
        "text": response.text or None,
        "tool_calls": [
            {
                "id": call.tool_call_id,
                "name": call.name,
                "arguments": call.arguments if call.raw_arguments is None else call.raw_arguments,
            }
            for call in response.tool_calls
        ],
        "finish_reason": response.finish_reason,
        "usage": response.usage_metadata,
        "reasoning": response.reasoning,
        "refusal": response.refusal,
    }
    if kind == "sse":
        shape["stream_error"] = response.error_message
    return shape


def expected_of(case: dict) -> dict:
    """The case's ``expected``, with our message formats and our deliberate differences applied."""
    expected = dict(case["expected"])
    if case["kind"] == "error":
        expected["message"] = f"HTTP {expected['status']}: {expected['message']}"
    if expected.get("stream_error"):
        expected["stream_error"] = f"error in stream: {expected['stream_error']}"
    return expected


@pytest.mark.parametrize("path", CASE_FILES, ids=[path.stem for path in CASE_FILES])
def test_recorded_response_is_read_as_expected(path):
    case = json.loads(path.read_text(encoding="utf-8"))
    recorded = case["response"]
    reply = Reply(recorded["status"], recorded["body"], content_type=recorded["content_type"] or "application/json")
    streaming = case["request"]["body"].get("stream") is True
    pieces: list = []
    request = LlmRequest(contents=[Message("user", "replay")])
    with LoopbackServer([reply]) as server:
        client = LlmClient(
            case["request"]["body"].get("model", "model"), server.base_url, "sk-conformance", max_retries=0
        )
        response = client.generate(request, on_text=pieces.append if streaming else None)
    expected = expected_of(case)
    for key, ours in DIFFERENCES.get(path.stem, ("", {}))[1].items():
        assert expected[key] != ours, f"{path.stem} no longer differs in {key!r}: remove it from DIFFERENCES"
        expected[key] = ours
    assert observed(response, case["kind"]) == expected
    if case["kind"] == "json":
        assert response.error_message is None
    if streaming and case["kind"] == "sse":
        assert "".join(pieces) == response.text  # on_text saw exactly the text that came back


def test_every_listed_difference_names_a_case_in_the_corpus():
    assert sorted(set(DIFFERENCES) - {path.stem for path in CASE_FILES}) == []
