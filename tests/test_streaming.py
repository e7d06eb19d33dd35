"""Streaming: server-sent events folded into the same LlmResponse a plain call returns."""

import threading

import pytest

from llm_client import LlmClient, LlmRequest, LlmResponse, _sse_events
from loopback import LoopbackServer, Reply, sse_pieces
from messages import Message, ToolCall

REQUEST = LlmRequest(contents=[Message("user", "Hi")])
WAIT_SECONDS = 10.0


def chunk(delta: dict, finish_reason=None, **extra) -> dict:
    """One chat.completion.chunk as OpenAI streams it, for choice 0."""
    return {
        "id": "chatcmpl-s",
        "object": "chat.completion.chunk",
        "created": 1,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        **extra,
    }


def text_chunks(*pieces: str) -> list:
    """OpenAI's plain text stream: a role chunk, one chunk per piece, a finishing chunk."""
    return (
        [chunk({"role": "assistant", "content": ""})]
        + [chunk({"content": piece}) for piece in pieces]
        + [chunk({}, "stop")]
    )


def stream(pieces: list, **reply_options) -> Reply:
    return Reply(pieces=pieces, content_type="text/event-stream", **reply_options)


def call_delta(index=None, call_id=None, name=None, arguments=None) -> dict:
    """One entry of delta.tool_calls, with only the fields given."""
    function = {key: value for key, value in (("name", name), ("arguments", arguments)) if value is not None}
    fields = (("index", index), ("id", call_id), ("type", "function" if call_id else None), ("function", function))
    return {key: value for key, value in fields if value is not None}


def run_stream(script: list, **options) -> tuple[LlmResponse, list, list]:
    """Serve ``script``, make one streaming call, and return the response, the text pieces and the requests."""
    pieces: list = []
    with LoopbackServer(script) as server:
        client = LlmClient("gpt-test", server.base_url, "sk-stream-test", sleep=lambda seconds: None, **options)
        response = client.generate(REQUEST, on_text=pieces.append)
    return response, pieces, server.requests


def test_streamed_text_reaches_on_text_piece_by_piece_and_comes_back_whole():
    response, pieces, requests = run_stream([stream(sse_pieces(*text_chunks("Hel", "lo", "!")))])
    assert pieces == ["Hel", "lo", "!"]
    assert response == LlmResponse(content=[Message("assistant", "Hello!")], finish_reason="stop", status_code=200)
    assert (requests[0].body["stream"], requests[0].body["stream_options"]) == (True, {"include_usage": True})


def test_a_stream_gives_the_same_response_as_a_plain_call():
    usage = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    chunks = text_chunks("Hello", "!") + [{"id": "chatcmpl-s", "choices": [], "usage": usage}]
    plain = {
        "id": "chatcmpl-s",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello!"}, "finish_reason": "stop"}],
        "usage": usage,
    }
    streamed, _, _ = run_stream([stream(sse_pieces(*chunks))])
    with LoopbackServer([Reply(body=plain)]) as server:
        assert LlmClient("gpt-test", server.base_url, "k").generate(REQUEST) == streamed


def test_text_reaches_on_text_before_the_server_has_finished():
    first_text_seen = threading.Event()
    seen_before_rest: list = []

    def on_text(piece: str) -> None:
        seen_before_rest.append(first_text_seen.is_set())
        first_text_seen.set()

    pieces = sse_pieces(*text_chunks("Hello", " world"))
    with LoopbackServer([stream(pieces, gates={2: first_text_seen})]) as server:
        response = LlmClient("gpt-test", server.base_url, "k").generate(REQUEST, on_text=on_text)
    # the server held everything after the first text until on_text had seen it
    assert (seen_before_rest, response.text, response.error_message) == ([False, True], "Hello world", None)


def test_a_streamed_tool_call_is_assembled_from_its_fragments():
    # OpenAI: id, type and name in the first delta; arguments split at arbitrary points
    chunks = [
        chunk({"role": "assistant", "content": None, "tool_calls": [call_delta(0, "call_1", "get_weather", "")]}),
        chunk({"tool_calls": [call_delta(0, arguments='{"ci')]}),
        chunk({"tool_calls": [call_delta(0, arguments='ty": "Par')]}),
        chunk({"tool_calls": [call_delta(0, arguments='is"}')]}),
        chunk({}, "tool_calls"),
    ]
    response, pieces, _ = run_stream([stream(sse_pieces(*chunks))])
    assert response == LlmResponse(
        content=[ToolCall("call_1", "get_weather", {"city": "Paris"})], finish_reason="tool_calls", status_code=200
    )
    assert pieces == []


def test_interleaved_parallel_tool_calls_are_told_apart_by_index():
    chunks = [
        chunk({"tool_calls": [call_delta(0, "call_a", "get_weather", "")]}),
        chunk({"tool_calls": [call_delta(1, "call_b", "get_time", "")]}),
        chunk({"tool_calls": [call_delta(0, arguments='{"city": ')]}),
        chunk({"tool_calls": [call_delta(1, arguments='{"zone": "UTC"}')]}),
        chunk({"tool_calls": [call_delta(0, arguments='"Rome"}')]}),
        chunk({}, "tool_calls"),
    ]
    response, _, _ = run_stream([stream(sse_pieces(*chunks))])
    assert response.content == [
        ToolCall("call_a", "get_weather", {"city": "Rome"}),
        ToolCall("call_b", "get_time", {"zone": "UTC"}),
    ]


def test_text_then_a_tool_call_in_one_stream_gives_both():
    chunks = text_chunks("Let me check.")[:-1] + [
        chunk({"tool_calls": [call_delta(0, "call_1", "get_weather", '{"city": "Oslo"}')]}),
        chunk({}, "tool_calls"),
    ]
    response, pieces, _ = run_stream([stream(sse_pieces(*chunks))])
    assert response.content == [
        Message("assistant", "Let me check."),
        ToolCall("call_1", "get_weather", {"city": "Oslo"}),
    ]
    assert pieces == ["Let me check."]


def test_two_whole_calls_in_one_delta_without_index_are_told_apart_by_id():
    # Mistral streams parallel calls in one delta, with ids but no "index"
    chunks = [
        chunk(
            {
                "tool_calls": [
                    call_delta(None, "QAw0JBXkB", "plus", '{"a": 1}'),
                    call_delta(None, "HlyhI5zAI", "minus", '{"a": 2}'),
                ]
            },
            "tool_calls",
        )
    ]
    response, _, _ = run_stream([stream(sse_pieces(*chunks))])
    assert response.content == [ToolCall("QAw0JBXkB", "plus", {"a": 1}), ToolCall("HlyhI5zAI", "minus", {"a": 2})]


def test_fragments_without_index_or_id_continue_the_previous_call():
    chunks = [
        chunk({"tool_calls": [call_delta(None, "call_1", "get_weather", '{"city"')]}),
        chunk({"tool_calls": [call_delta(None, arguments=': "Lima"}')]}),
        chunk({}, "tool_calls"),
    ]
    response, _, _ = run_stream([stream(sse_pieces(*chunks))])
    assert response.content == [ToolCall("call_1", "get_weather", {"city": "Lima"})]


def test_a_whole_call_without_index_or_id_gets_a_generated_id():
    # Gemini: one chunk holding the whole call, with no index and the id ""
    chunks = [
        chunk(
            {
                "tool_calls": [
                    {"id": "", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}
                ]
            },
            "stop",
        )
    ]
    response, _, _ = run_stream([stream(sse_pieces(*chunks))])
    assert response.content == [ToolCall("call_c66a2ec9bc71_0", "get_weather", {"city": "Oslo"})]


def test_an_id_and_name_repeated_in_every_chunk_are_taken_once():
    # llama.cpp and Kimi repeat id, type and name with each arguments fragment
    chunks = [
        chunk({"tool_calls": [call_delta(0, "call_1", "get_weather", '{"city": ')]}),
        chunk({"tool_calls": [call_delta(0, "call_1", "get_weather", '"Quito"}')]}),
        chunk({}, "tool_calls"),
    ]
    response, _, _ = run_stream([stream(sse_pieces(*chunks))])
    assert response.content == [ToolCall("call_1", "get_weather", {"city": "Quito"})]


def test_a_name_arriving_late_and_an_empty_id_replaced_later_are_both_kept():
    chunks = [
        chunk({"tool_calls": [{"index": 0, "id": "", "function": {"name": "", "arguments": "{}"}}]}),
        chunk({"tool_calls": [{"index": 0, "id": "call_9", "function": {"name": "list_files"}}]}),
        chunk({}, "tool_calls"),
    ]
    response, _, _ = run_stream([stream(sse_pieces(*chunks))])
    assert response.content == [ToolCall("call_9", "list_files", {})]


def test_streamed_arguments_sent_as_an_object_are_used_as_they_are():
    chunks = [chunk({"tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "f", "arguments": {"x": 1}}}]})]
    response, _, _ = run_stream([stream(sse_pieces(*chunks))])
    assert response.content == [ToolCall("call_1", "f", {"x": 1})]


def test_two_ids_on_one_index_give_an_error_instead_of_a_merged_call():
    chunks = [
        chunk({"tool_calls": [call_delta(0, "call_a", "get_weather", '{"city": "Oslo"}')]}),
        chunk({"tool_calls": [call_delta(0, "call_b", "get_time", "{}")]}),
        chunk({}, "tool_calls"),
    ]
    response, _, _ = run_stream([stream(sse_pieces(*chunks))])
    assert response.error_message == "tool calls 'call_a' and 'call_b' were both streamed with index 0"


def test_usage_comes_from_the_final_chunk_with_no_choices():
    # stream_options.include_usage: a last chunk with "choices": [] holds the usage
    usage_chunk = {"id": "chatcmpl-s", "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4}}
    response, _, _ = run_stream([stream(sse_pieces(*text_chunks("Hi"), usage_chunk))])
    assert response.usage_metadata == {"input_tokens": 9, "output_tokens": 4}


def test_the_last_usage_sent_wins():
    # xAI sends a growing usage object on every chunk
    chunks = [
        chunk({"content": "a"}, usage={"prompt_tokens": 9, "completion_tokens": 1}),
        chunk({"content": "b"}, "stop", usage={"prompt_tokens": 9, "completion_tokens": 2}),
    ]
    response, _, _ = run_stream([stream(sse_pieces(*chunks))])
    assert response.usage_metadata == {"input_tokens": 9, "output_tokens": 2}


def test_streamed_reasoning_goes_to_reasoning_not_to_on_text():
    # DeepSeek streams reasoning_content before the content
    chunks = [
        chunk({"reasoning_content": "Think"}),
        chunk({"reasoning_content": "ing."}),
        chunk({"content": "Done."}, "stop"),
    ]
    response, pieces, _ = run_stream([stream(sse_pieces(*chunks))])
    assert (response.reasoning, response.text, pieces) == ("Thinking.", "Done.", ["Done."])


def test_streamed_thinking_parts_go_to_reasoning():
    # Mistral's Magistral streams content as lists of thinking parts, then strings
    chunks = [
        chunk({"content": [{"type": "thinking", "thinking": [{"type": "text", "text": "Hmm"}]}]}),
        chunk({"content": [{"type": "thinking", "thinking": [{"type": "text", "text": "."}]}]}),
        chunk({"content": "Yes."}, "stop"),
    ]
    response, pieces, _ = run_stream([stream(sse_pieces(*chunks))])
    assert (response.reasoning, response.text, pieces) == ("Hmm.", "Yes.", ["Yes."])


def test_a_streamed_refusal_is_joined():
    chunks = [chunk({"content": None, "refusal": "I can't"}), chunk({"refusal": " help."}, "stop")]
    response, pieces, _ = run_stream([stream(sse_pieces(*chunks))])
    assert (response.refusal, response.content, pieces) == ("I can't help.", [], [])


def test_crlf_line_endings_and_comments_are_understood():
    body = (
        ": keep-alive\r\n\r\n"
        'data: {"choices": [{"index": 0, "delta": {"content": "Hi"}}]}\r\n\r\n'
        ": OPENROUTER PROCESSING\r\n\r\n"
        'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\r\n\r\n'
        "data: [DONE]\r\n\r\n"
    )
    response, pieces, _ = run_stream([stream([body])])
    assert (response.text, response.finish_reason, response.error_message, pieces) == ("Hi", "stop", None, ["Hi"])


def test_events_split_across_network_pieces_are_put_back_together():
    body = "".join(sse_pieces(*text_chunks("Hello")))
    response, _, _ = run_stream([stream([body[index : index + 7] for index in range(0, len(body), 7)])])
    assert (response.text, response.error_message) == ("Hello", None)


def test_a_stream_without_done_is_complete():
    # Hugging Face ends the stream without data: [DONE]
    response, _, _ = run_stream([stream(sse_pieces(*text_chunks("Hi"), done=False))])
    assert response == LlmResponse(content=[Message("assistant", "Hi")], finish_reason="stop", status_code=200)


def test_a_stream_without_a_finish_reason_is_complete_with_none():
    response, _, _ = run_stream([stream(sse_pieces(*text_chunks("Hi")[:-1]))])
    assert response == LlmResponse(content=[Message("assistant", "Hi")], status_code=200)


def test_a_json_body_sent_instead_of_a_stream_is_read_and_its_text_handed_to_on_text_once():
    # a server that ignored "stream": true answers with a whole chat.completion
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}]}
    response, pieces, _ = run_stream([Reply(body=body)])
    assert (response, pieces) == (
        LlmResponse(content=[Message("assistant", "Hi")], finish_reason="stop", status_code=200),
        ["Hi"],
    )


def test_an_error_object_sent_instead_of_a_stream_keeps_the_provider_message():
    # a gateway that answers a stream request with status 200 and an error object
    response, pieces, _ = run_stream([Reply(body={"error": {"message": "model is overloaded"}})])
    assert (response, pieces) == (
        LlmResponse(error_message="error in response: model is overloaded", status_code=200),
        [],
    )


def test_a_stream_labelled_as_json_is_still_read_as_a_stream():
    # Together sends its event stream without a text/event-stream Content-Type
    response, pieces, _ = run_stream([Reply(pieces=sse_pieces(*text_chunks("Hel", "lo")))])
    assert (response, pieces) == (
        LlmResponse(content=[Message("assistant", "Hello")], finish_reason="stop", status_code=200),
        ["Hel", "lo"],
    )


def test_a_chunked_body_cut_short_is_an_error_that_keeps_the_text():
    response, _, requests = run_stream([stream(sse_pieces(*text_chunks("Hel", "lo"))[:3], ending="cut")])
    assert response == LlmResponse(
        content=[Message("assistant", "Hello")],
        error_message="stream broken off: IncompleteRead(0 bytes read)",
        status_code=200,
    )
    assert len(requests) == 1


def test_a_body_cut_short_of_its_content_length_is_an_error_that_keeps_the_text():
    whole = "".join(sse_pieces(*text_chunks("Hel", "lo")))
    cut_in_the_done_line = whole[: whole.index("[DONE]") + 2]
    reply = Reply(
        body=whole + " " * (2 * len(cut_in_the_done_line) - len(whole)), content_type="text/event-stream", ending="cut"
    )  # padded so that the half the server sends ends inside "data: [DONE]"
    response, pieces, requests = run_stream([reply])
    assert response.error_message.startswith("stream broken off: the body ended ")
    assert response.error_message.endswith(" bytes short of its Content-Length")
    assert (response.content, pieces, len(requests)) == ([Message("assistant", "Hello")], ["Hel", "lo"], 1)


def test_a_reset_connection_is_an_error_that_keeps_the_text():
    text_seen = threading.Event()
    pieces = sse_pieces(*text_chunks("Hel", "lo"))[:2]
    pieces_seen: list = []
    with LoopbackServer([stream(pieces, gates={2: text_seen}, ending="reset")]) as server:
        client = LlmClient("gpt-test", server.base_url, "k", max_retries=2, sleep=lambda seconds: None)
        response = client.generate(REQUEST, on_text=lambda piece: (pieces_seen.append(piece), text_seen.set()))
    assert response == LlmResponse(
        content=[Message("assistant", "Hel")],
        status_code=200,
        error_message="stream broken off: [Errno 104] Connection reset by peer",
    )
    # no retry once text was handed over: one request only
    assert (pieces_seen, len(server.requests)) == (["Hel"], 1)


def test_a_stream_that_stalls_longer_than_the_timeout_is_an_error_that_keeps_the_text():
    never = threading.Event()
    pieces = sse_pieces(*text_chunks("Hel", "lo"))
    with LoopbackServer([stream(pieces, gates={2: never})]) as server:
        client = LlmClient("gpt-test", server.base_url, "k", timeout=0.2, max_retries=2)
        response = client.generate(REQUEST, on_text=lambda piece: None)
        never.set()
    assert (response.text, response.error_message, len(server.requests)) == ("Hel", "stream broken off: timed out", 1)


def test_data_that_is_not_json_is_an_error_that_keeps_the_text():
    pieces = sse_pieces(*text_chunks("Hel"))[:2] + ["data: {not json\n\n"] + sse_pieces(chunk({"content": "lo"}))
    response, pieces_seen, _ = run_stream([stream(pieces)])
    assert response == LlmResponse(
        content=[Message("assistant", "Hel")], status_code=200, error_message="stream data is not JSON: {not json"
    )
    assert pieces_seen == ["Hel"]


def test_an_error_chunk_in_the_stream_is_an_error_that_keeps_the_text():
    # OpenRouter reports an upstream failure mid-stream as a chunk with "error", then [DONE]
    error_chunk = chunk({"content": ""}, error={"code": 502, "message": "Upstream went away"})
    response, _, _ = run_stream([stream(sse_pieces(*text_chunks("Hel")[:2], error_chunk))])
    assert response == LlmResponse(
        content=[Message("assistant", "Hel")], status_code=200, error_message="error in stream: Upstream went away"
    )


def test_an_error_event_in_the_stream_is_an_error_that_keeps_the_text():
    # Groq ends a failed stream with "event: error" and no [DONE]
    error_event = 'event: error\ndata: {"error": {"message": "Tool call validation failed"}}\n\n'
    response, _, _ = run_stream([stream(sse_pieces(*text_chunks("Hel")[:2], done=False) + [error_event])])
    assert response == LlmResponse(
        content=[Message("assistant", "Hel")],
        status_code=200,
        error_message="error in stream: Tool call validation failed",
    )


def test_an_http_error_before_the_stream_starts_is_retried():
    response, pieces, requests = run_stream(
        [Reply(503, {"error": {"message": "busy"}}), stream(sse_pieces(*text_chunks("Hi")))]
    )
    assert (response.text, response.error_message, pieces, len(requests)) == ("Hi", None, ["Hi"], 2)


def test_an_exception_raised_by_on_text_propagates():
    def on_text(piece: str) -> None:
        raise ValueError("the caller's bug")

    with LoopbackServer([stream(sse_pieces(*text_chunks("Hi")))]) as server:
        with pytest.raises(ValueError, match="the caller's bug"):
            LlmClient("gpt-test", server.base_url, "k").generate(REQUEST, on_text=on_text)


# --- the event-stream parser on its own --------------------------------------------------


def test_sse_data_lines_are_joined_with_newlines_and_fields_read_per_the_spec():
    lines = ["event: update", "data: first", "data:second", "id: 7", "retry: 10", "", "data: third"]
    assert list(_sse_events(iter(lines))) == [("update", "first\nsecond"), (None, "third")]


def test_sse_comments_and_lines_that_only_look_like_fields_are_ignored():
    lines = [": a comment", " data: indented, so no field", "", "data: kept", ""]
    assert list(_sse_events(iter(lines))) == [(None, "kept")]


def test_streamed_reasoning_content_is_kept_with_the_reply_to_be_sent_back():
    # DeepSeek streams its reasoning in delta.reasoning_content before the tool call
    pieces = sse_pieces(
        chunk({"role": "assistant", "content": None, "reasoning_content": "I need "}),
        chunk({"reasoning_content": "the weather."}),
        chunk({"tool_calls": [call_delta(0, "c1", "w", "{}")]}),
        chunk({}, "tool_calls"),
    )
    response, text, _ = run_stream([stream(pieces)])
    assert (response.content, response.reasoning, text) == (
        [Message("assistant", "", reasoning_content="I need the weather."), ToolCall("c1", "w", {})],
        "I need the weather.",
        [],
    )
