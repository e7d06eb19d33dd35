"""LlmClient over real HTTP against the loopback server: success, errors, retries, timeouts."""

import random
import threading

import pytest

from llm_client import LlmClient, LlmRequest, LlmResponse
from loopback import LoopbackServer, Reply, free_port
from messages import Message, ToolCall

KEY = "sk-http-test-0123456789"
HELLO = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello!"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
}
HELLO_RESPONSE = LlmResponse(
    content=[Message("assistant", "Hello!")],
    usage_metadata={"input_tokens": 3, "output_tokens": 2},
    finish_reason="stop",
    status_code=200,
)
REQUEST = LlmRequest(contents=[Message("user", "Hi")])


def error_body(message: str) -> dict:
    """OpenAI's error envelope."""
    return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}


def run(script: list, **options) -> tuple[LlmResponse, list, list]:
    """Serve ``script``, make one call, and return the response, the requests and the sleeps."""
    sleeps: list = []
    with LoopbackServer(script) as server:
        client = LlmClient("gpt-test", server.base_url, KEY, sleep=sleeps.append, **options)
        response = client.generate(REQUEST)
    return response, server.requests, sleeps


def test_a_successful_call_posts_the_body_and_parses_the_reply():
    response, requests, sleeps = run([Reply(body=HELLO)])
    assert response == HELLO_RESPONSE
    assert (requests[0].method, requests[0].path, requests[0].headers["content-type"]) == (
        "POST",
        "/v1/chat/completions",
        "application/json",
    )
    assert requests[0].body == {"model": "gpt-test", "messages": [{"role": "user", "content": "Hi"}]}
    assert sleeps == []


def test_a_tool_call_reply_comes_back_as_a_tool_call():
    body = {
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                        }
                    ],
                },
            }
        ]
    }
    response, _, _ = run([Reply(body=body)])
    assert response.content == [ToolCall("call_1", "get_weather", {"city": "Paris"})]


def test_a_400_is_reported_with_the_provider_message_and_not_retried():
    response, requests, sleeps = run([Reply(400, error_body("Unsupported parameter: 'stop'")), Reply(body=HELLO)])
    assert response == LlmResponse(error_message="HTTP 400: Unsupported parameter: 'stop'", status_code=400)
    assert (len(requests), sleeps) == (1, [])


@pytest.mark.parametrize("status", [401, 403, 404, 422])
def test_client_errors_are_not_retried(status):
    response, requests, sleeps = run([Reply(status, error_body("no")), Reply(body=HELLO)])
    assert (response.error_message, response.status_code) == (f"HTTP {status}: no", status)
    assert (len(requests), sleeps) == (1, [])


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503])
def test_transient_errors_are_retried_until_success(status):
    response, requests, sleeps = run([Reply(status, error_body("try again")), Reply(body=HELLO)])
    assert response == HELLO_RESPONSE
    assert (len(requests), len(sleeps)) == (2, 1)


def test_retries_stop_after_max_retries_with_the_last_error():
    response, requests, sleeps = run([Reply(503, error_body("overloaded"))] * 4, max_retries=2)
    assert response == LlmResponse(error_message="HTTP 503: overloaded", status_code=503)
    assert (len(requests), len(sleeps)) == (3, 2)


def test_max_retries_zero_makes_one_attempt():
    response, requests, sleeps = run([Reply(503, error_body("overloaded")), Reply(body=HELLO)], max_retries=0)
    assert (response.status_code, len(requests), sleeps) == (503, 1, [])


def test_backoff_doubles_with_jitter_between_attempts(monkeypatch):
    monkeypatch.setattr(random, "random", lambda: 0.5)
    _, _, sleeps = run([Reply(500, error_body("x"))] * 4, max_retries=3)
    assert sleeps == [0.75, 1.5, 3.0]


@pytest.mark.parametrize(
    "headers, wait",
    [
        ({"Retry-After": "7"}, 7.0),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after-ms": "250", "Retry-After": "1"}, 0.25),
        ({"Retry-After": "3600"}, 60.0),
        ({"Retry-After": "Fri, 31 Dec 9999 23:59:59 GMT"}, 60.0),
        ({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),
    ],
    ids=["seconds", "milliseconds", "milliseconds-first", "capped", "date-ahead", "date-past"],
)
def test_the_wait_the_server_asks_for_is_honoured(headers, wait):
    _, requests, sleeps = run([Reply(429, error_body("slow down"), headers=headers), Reply(body=HELLO)])
    assert (len(requests), sleeps) == (2, [wait])


def test_an_unreadable_retry_after_falls_back_to_backoff(monkeypatch):
    monkeypatch.setattr(random, "random", lambda: 0.0)
    _, _, sleeps = run([Reply(429, error_body("slow down"), headers={"Retry-After": "soon"}), Reply(body=HELLO)])
    assert sleeps == [0.5]


@pytest.mark.parametrize(
    "status, reason",
    [
        (301, "Moved Permanently"),
        (302, "Found"),
        (303, "See Other"),
        (307, "Temporary Redirect"),
        (308, "Permanent Redirect"),
    ],
)
def test_a_redirect_is_reported_not_followed_so_the_key_goes_nowhere_else(status, reason):
    # urllib follows 301, 302 and 303 with every header, Authorization too, and the POST as a GET
    with LoopbackServer([Reply(body=HELLO)]) as elsewhere:
        moved = Reply(status, b"", headers={"Location": f"{elsewhere.base_url}/chat/completions"})
        response, requests, sleeps = run([moved, Reply(body=HELLO)])
    assert response == LlmResponse(error_message=f"HTTP {status}: {reason}", status_code=status)
    assert (elsewhere.requests, len(requests), sleeps) == ([], 1, [])


def test_a_refused_connection_is_retried_then_reported():
    sleeps: list = []
    client = LlmClient("gpt-test", f"http://127.0.0.1:{free_port()}/v1", KEY, sleep=sleeps.append)
    response = client.generate(REQUEST)
    assert response == LlmResponse(error_message="no answer from the server: [Errno 111] Connection refused")
    assert len(sleeps) == 2


def test_a_server_that_does_not_answer_in_time_gives_a_timeout_error():
    released = threading.Event()
    with LoopbackServer([Reply(body=HELLO, hold=released)]) as server:
        client = LlmClient("gpt-test", server.base_url, KEY, timeout=0.2, max_retries=0)
        response = client.generate(REQUEST)
        released.set()
    assert response == LlmResponse(error_message="no answer from the server: timed out")


def test_a_timeout_is_retried():
    released = threading.Event()
    sleeps: list = []
    with LoopbackServer([Reply(body=HELLO, hold=released), Reply(body=HELLO)]) as server:
        client = LlmClient("gpt-test", server.base_url, KEY, timeout=0.2, max_retries=1, sleep=sleeps.append)
        response = client.generate(REQUEST)
        released.set()
    assert (response, len(sleeps)) == (HELLO_RESPONSE, 1)


def test_an_html_error_page_is_reported_as_its_text():
    page = "<html><head><title>502 Bad Gateway</title></head>\n<body><h1>502 Bad Gateway</h1><hr>nginx</body></html>"
    response, _, _ = run([Reply(502, page, content_type="text/html")], max_retries=0)
    assert response == LlmResponse(error_message="HTTP 502: 502 Bad Gateway 502 Bad Gateway nginx", status_code=502)


def test_a_long_error_body_is_cut_short():
    response, _, _ = run([Reply(500, "x" * 2000, content_type="text/plain")], max_retries=0)
    assert response.error_message == "HTTP 500: " + "x" * 500 + "..."


def test_an_error_without_a_body_is_named_by_its_status():
    response, _, _ = run([Reply(503, b"")], max_retries=0)
    assert response == LlmResponse(error_message="HTTP 503: Service Unavailable", status_code=503)


def test_an_error_with_an_empty_message_is_named_by_its_status():
    # llama-cpp-python answers an unsupported tool_choice with 500 and "message": ""
    body = {"error": {"message": "", "type": "internal_server_error"}}
    response, _, _ = run([Reply(500, body)], max_retries=0)
    assert response.error_message == "HTTP 500: Internal Server Error"


def test_a_200_body_that_is_not_json_is_an_error_and_not_retried():
    response, requests, _ = run(
        [Reply(200, "Internal error, please retry", content_type="text/plain"), Reply(body=HELLO)]
    )
    assert response == LlmResponse(error_message="response is not JSON: Internal error, please retry", status_code=200)
    assert len(requests) == 1


def test_an_empty_200_body_is_an_error():
    response, _, _ = run([Reply(200, b"")])
    assert response == LlmResponse(error_message="the server sent an empty body", status_code=200)


def test_a_200_body_with_no_choices_is_an_error():
    response, _, _ = run([Reply(200, {"id": "chatcmpl-1", "choices": []})])
    assert response == LlmResponse(error_message="response has no choices", status_code=200)


def test_a_200_body_cut_short_is_an_error_and_not_retried():
    response, requests, _ = run([Reply(200, HELLO, ending="cut"), Reply(body=HELLO)])
    assert response.error_message.startswith("response body broken off: IncompleteRead(")
    assert (response.status_code, len(requests)) == (200, 1)


@pytest.mark.parametrize(
    "reply",
    [
        Reply(401, {"error": {"message": f"Incorrect API key provided: {KEY}."}}),
        Reply(400, f"bad header Authorization: Bearer {KEY}", content_type="text/plain"),
        Reply(200, {"error": {"message": f"key {KEY} is over quota"}}),
    ],
    ids=["json-error", "text-error", "error-in-200"],
)
def test_the_key_never_appears_in_an_error_message_even_when_the_server_echoes_it(reply):
    response, _, _ = run([reply], max_retries=0)
    assert KEY not in response.error_message and "[redacted]" in response.error_message


def test_an_azure_style_key_header_is_redacted_too():
    with LoopbackServer([Reply(401, {"error": {"message": "bad key azure-key-0123456789"}})]) as server:
        client = LlmClient("gpt-4o", server.base_url, headers={"api-key": "azure-key-0123456789"}, max_retries=0)
        response = client.generate(REQUEST)
    assert response.error_message == "HTTP 401: bad key [redacted]"


def test_azure_headers_and_query_reach_the_server(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with LoopbackServer([Reply(body=HELLO)]) as server:
        base_url = server.base_url.replace("/v1", "/openai/deployments/gpt-4o")
        client = LlmClient("gpt-4o", base_url, headers={"api-key": "azure-key"}, query={"api-version": "2024-10-21"})
        client.generate(REQUEST)
    received = server.requests[0]
    assert received.path == "/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21"
    assert (received.headers["api-key"], "authorization" in received.headers) == ("azure-key", False)


def test_openrouter_attribution_headers_reach_the_server():
    with LoopbackServer([Reply(body=HELLO)]) as server:
        headers = {"HTTP-Referer": "https://example.org", "X-Title": "plainagent tests"}
        LlmClient("m", server.base_url, KEY, headers=headers).generate(REQUEST)
    received = server.requests[0].headers
    assert (received["http-referer"], received["x-title"]) == ("https://example.org", "plainagent tests")


def test_config_is_passed_through_to_the_server():
    with LoopbackServer([Reply(body=HELLO)]) as server:
        client = LlmClient("m", server.base_url, KEY, temperature=0.2, seed=3, top_p=None, parallel_tool_calls=False)
        client.generate(REQUEST)
    assert server.requests[0].body == {
        "model": "m",
        "messages": [{"role": "user", "content": "Hi"}],
        "temperature": 0.2,
        "seed": 3,
        "parallel_tool_calls": False,
    }


def test_a_trailing_slash_in_the_base_url_is_ignored():
    with LoopbackServer([Reply(body=HELLO)]) as server:
        LlmClient("m", server.base_url + "/", KEY).generate(REQUEST)
    assert server.requests[0].path == "/v1/chat/completions"
