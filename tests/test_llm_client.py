"""Unit tests of the wire mapping in llm_client: request building and response parsing.

Each payload is hand-built; its comment names the documented or real server shape it imitates.
"""

import pytest

from llm_client import LlmClient, LlmRequest, LlmResponse, _build_messages, _parse_response
from loopback import LoopbackServer, Reply
from messages import Message, ToolCall, ToolResult
from tools import tool


@tool
def get_weather(city: str) -> str:
    """Get the weather for a city.

    Args:
        city: The city name.
    """
    return "sunny"


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city name."}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}


def make_client(**options) -> LlmClient:
    return LlmClient("gpt-test", "http://127.0.0.1:9/v1", "sk-unit-test-key", **options)


def openai_body(message: dict, finish_reason: str = "stop", **extra) -> dict:
    """A chat.completion body as OpenAI documents it, around one message."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        **extra,
    }


def tool_call_body(function: dict, call_id: str = "call_1") -> dict:
    """An OpenAI-shaped reply holding one tool call with the given ``function`` object."""
    call = {"id": call_id, "type": "function", "function": function}
    return openai_body({"content": None, "tool_calls": [call]}, "tool_calls")


# --- _build_messages ---------------------------------------------------------------------


def test_instructions_become_one_system_message_ahead_of_the_conversation():
    request = LlmRequest(["Be brief.", "Answer in French."], [Message("user", "Hi")])
    assert _build_messages(request) == [
        {"role": "system", "content": "Be brief.\n\nAnswer in French."},
        {"role": "user", "content": "Hi"},
    ]


def test_no_instructions_send_no_system_message():
    assert _build_messages(LlmRequest(contents=[Message("user", "Hi")])) == [{"role": "user", "content": "Hi"}]


def test_assistant_text_and_its_tool_calls_become_one_wire_message():
    request = LlmRequest(
        contents=[
            Message("user", "Weather in Paris and Rome?"),
            Message("assistant", "Let me check."),
            ToolCall("call_1", "get_weather", {"city": "Paris"}),
            ToolCall("call_2", "get_weather", {"city": "Rome"}),
        ]
    )
    assert _build_messages(request)[1] == {
        "role": "assistant",
        "content": "Let me check.",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
            {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}},
        ],
    }


def test_a_reply_of_tool_calls_only_is_sent_with_empty_string_content():
    request = LlmRequest(
        contents=[
            Message("user", "Weather in Paris and Rome?"),
            ToolCall("call_1", "get_weather", {"city": "Paris"}),
            ToolCall("call_2", "get_weather", {"city": "Rome"}),
        ]
    )
    assert _build_messages(request)[1] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
            {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}},
        ],
    }


def test_tool_results_become_tool_messages_without_a_name():
    request = LlmRequest(contents=[ToolResult("call_1", "get_weather", "sunny", is_error=False)])
    assert _build_messages(request) == [{"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]


def test_a_whole_tool_round_trip_is_sent_in_order():
    request = LlmRequest(
        ["Use tools."],
        [
            Message("user", "Weather in Paris?"),
            ToolCall("call_1", "get_weather", {"city": "Paris"}),
            ToolResult("call_1", "get_weather", "sunny"),
            ToolCall("call_2", "get_weather", {"city": "Paris"}),
            ToolResult("call_2", "get_weather", "still sunny"),
            Message("assistant", "It is sunny."),
        ],
    )
    assert _build_messages(request) == [
        {"role": "system", "content": "Use tools."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_2", "content": "still sunny"},
        {"role": "assistant", "content": "It is sunny."},
    ]


def test_arguments_are_sent_as_a_json_string_keeping_non_ascii_text():
    request = LlmRequest(contents=[ToolCall("call_1", "get_weather", {"city": "Zürich"})])
    assert _build_messages(request)[0]["tool_calls"][0]["function"] == {
        "name": "get_weather",
        "arguments": '{"city": "Zürich"}',
    }


def test_empty_arguments_are_sent_as_an_empty_json_object():
    request = LlmRequest(contents=[ToolCall("call_1", "list_files", {})])
    assert _build_messages(request)[0]["tool_calls"][0]["function"] == {"name": "list_files", "arguments": "{}"}


def test_raw_arguments_that_were_not_json_are_sent_back_verbatim():
    request = LlmRequest(contents=[ToolCall.from_arguments_text("call_1", "get_weather", '{"city": "Par')])
    assert _build_messages(request)[0]["tool_calls"][0]["function"] == {
        "name": "get_weather",
        "arguments": '{"city": "Par',
    }


# --- _build_body -------------------------------------------------------------------------


def test_a_plain_request_body_holds_only_model_and_messages():
    body = make_client()._build_body(LlmRequest(contents=[Message("user", "Hi")]), stream=False)
    assert body == {"model": "gpt-test", "messages": [{"role": "user", "content": "Hi"}]}


def test_tools_are_sent_as_function_definitions():
    body = make_client()._build_body(LlmRequest(contents=[Message("user", "Hi")], tools=[get_weather]), stream=False)
    assert body == {"model": "gpt-test", "messages": [{"role": "user", "content": "Hi"}], "tools": [WEATHER_TOOL]}


@pytest.mark.parametrize("choice", ["auto", "none", "required"])
def test_tool_choice_keywords_are_sent_as_strings(choice):
    request = LlmRequest(contents=[Message("user", "Hi")], tools=[get_weather], tool_choice=choice)
    assert make_client()._build_body(request, stream=False)["tool_choice"] == choice


def test_tool_choice_naming_a_tool_is_sent_as_a_function_object():
    request = LlmRequest(contents=[Message("user", "Hi")], tools=[get_weather], tool_choice="get_weather")
    assert make_client()._build_body(request, stream=False)["tool_choice"] == {
        "type": "function",
        "function": {"name": "get_weather"},
    }


def test_tool_choice_is_left_out_when_there_are_no_tools():
    request = LlmRequest(contents=[Message("user", "Hi")], tool_choice="auto")
    assert make_client()._build_body(request, stream=False) == {
        "model": "gpt-test",
        "messages": [{"role": "user", "content": "Hi"}],
    }


def test_config_goes_into_the_body_and_none_values_are_left_out():
    client = make_client(temperature=0, seed=7, max_completion_tokens=None, response_format={"type": "json_object"})
    assert client._build_body(LlmRequest(contents=[Message("user", "Hi")]), stream=False) == {
        "model": "gpt-test",
        "messages": [{"role": "user", "content": "Hi"}],
        "temperature": 0,
        "seed": 7,
        "response_format": {"type": "json_object"},
    }


def test_a_streaming_body_asks_for_usage():
    body = make_client()._build_body(LlmRequest(contents=[Message("user", "Hi")]), stream=True)
    assert body == {
        "model": "gpt-test",
        "messages": [{"role": "user", "content": "Hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def test_a_streaming_body_without_stream_usage_has_no_stream_options():
    body = make_client(stream_usage=False)._build_body(LlmRequest(contents=[Message("user", "Hi")]), stream=True)
    assert body == {"model": "gpt-test", "messages": [{"role": "user", "content": "Hi"}], "stream": True}


@pytest.mark.parametrize("key", ["messages", "tools", "tool_choice", "stream"])
def test_config_cannot_set_a_field_the_client_builds(key):
    with pytest.raises(ValueError, match=f"'{key}' cannot be set as config"):
        make_client(**{key: "x"})


def test_a_negative_max_retries_is_refused_at_construction():
    with pytest.raises(ValueError, match="max_retries is the number of extra attempts, 0 or more; got -1"):
        make_client(max_retries=-1)


def test_a_base_url_that_is_not_http_is_refused_at_construction():
    with pytest.raises(ValueError, match="base_url must start with http:// or https://"):
        LlmClient("m", "localhost:8080/v1")


def test_a_header_value_that_http_cannot_carry_is_refused_at_construction_without_being_shown():
    # HTTP header values go out as latin-1; an emoji in an attribution title would escape generate
    with pytest.raises(ValueError, match="X-Title holds a character an HTTP header cannot carry") as raised:
        make_client(headers={"X-Title": '"Café ☕"'})
    assert "Café" not in str(raised.value)


# --- construction ------------------------------------------------------------------------


def test_base_url_and_key_come_from_the_environment_when_not_given(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1/")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    client = LlmClient("m")
    assert (client.base_url, client.api_key) == ("http://127.0.0.1:8080/v1", "sk-from-the-environment")


def test_base_url_defaults_to_openai(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert LlmClient("m").base_url == "https://api.openai.com/v1"


def test_an_explicit_empty_key_is_not_replaced_by_the_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    assert LlmClient("m", "http://127.0.0.1:9/v1", "").api_key == ""


def test_the_api_key_is_not_in_the_repr():
    client = LlmClient("gpt-test", "http://127.0.0.1:9/v1", "sk-very-secret-key", headers={"api-key": "azure-secret"})
    assert repr(client) == "LlmClient(model='gpt-test', base_url='http://127.0.0.1:9/v1')"


def test_no_authorization_header_is_sent_without_a_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with LoopbackServer([Reply(body=openai_body({"content": "Hi"}))]) as server:
        LlmClient("m", server.base_url).generate(LlmRequest(contents=[Message("user", "Hi")]))
    assert "authorization" not in server.requests[0].headers


def test_the_key_is_sent_as_a_bearer_token():
    with LoopbackServer([Reply(body=openai_body({"content": "Hi"}))]) as server:
        LlmClient("m", server.base_url, "sk-bearer-test").generate(LlmRequest(contents=[Message("user", "Hi")]))
    assert server.requests[0].headers["authorization"] == "Bearer sk-bearer-test"


# --- _parse_response ---------------------------------------------------------------------


def test_a_plain_text_reply_is_parsed_whole():
    # OpenAI's documented chat.completion object
    assert _parse_response(openai_body({"content": "Hello!", "refusal": None})) == LlmResponse(
        content=[Message("assistant", "Hello!")],
        usage_metadata={"input_tokens": 10, "output_tokens": 5},
        finish_reason="stop",
    )


def test_parallel_tool_calls_with_null_content_are_parsed_in_order():
    # OpenAI: content null next to tool_calls
    body = openai_body(
        {
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
                },
            ],
        },
        "tool_calls",
    )
    assert _parse_response(body).content == [
        ToolCall("call_1", "get_weather", {"city": "Paris"}),
        ToolCall("call_2", "get_weather", {"city": "Rome"}),
    ]


def test_text_next_to_a_tool_call_comes_first():
    # DeepSeek and OpenRouter send content next to tool_calls
    body = openai_body(
        {
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                },
            ],
        },
        "tool_calls",
    )
    assert _parse_response(body).content == [
        Message("assistant", "Checking."),
        ToolCall("call_1", "get_weather", {"city": "Paris"}),
    ]


def test_a_message_without_a_content_key_gives_no_text():
    # Groq: a tool-call message with no "content" key at all
    body = tool_call_body({"name": "get_weather", "arguments": '{"city": "Paris"}'})
    del body["choices"][0]["message"]["content"]
    assert _parse_response(body).content == [ToolCall("call_1", "get_weather", {"city": "Paris"})]


def test_empty_string_content_gives_no_text_message():
    # Mistral sends content "" next to its tool calls
    assert _parse_response(openai_body({"content": ""})).content == []


def test_text_parts_of_a_content_list_are_joined():
    # content as an array of parts
    body = openai_body({"content": [{"type": "text", "text": "Hel"}, {"type": "text", "text": "lo"}]})
    assert _parse_response(body).content == [Message("assistant", "Hello")]


def test_thinking_parts_of_a_content_list_become_reasoning():
    # Mistral's Magistral: a "thinking" part holding text parts, then a "text" part
    body = openai_body(
        {
            "content": [
                {"type": "thinking", "thinking": [{"type": "text", "text": "The user greets me."}]},
                {"type": "text", "text": "Hello!"},
            ]
        }
    )
    response = _parse_response(body)
    assert (response.content, response.reasoning) == ([Message("assistant", "Hello!")], "The user greets me.")


def test_content_that_is_an_object_becomes_its_json_text():
    # Cloudflare Workers AI answers response_format with an object as content
    body = openai_body({"content": {"title": "Apples", "year": 2024}})
    assert _parse_response(body).content == [Message("assistant", '{"title": "Apples", "year": 2024}')]


@pytest.mark.parametrize(
    "function",
    [
        {"name": "list_files", "arguments": "{}"},  # OpenAI, Mistral
        {"name": "list_files", "arguments": ""},  # Databricks (Claude) for a tool without parameters
        {"name": "list_files", "arguments": None},
        {"name": "list_files"},  # OpenRouter: no "arguments" key
    ],
    ids=["empty-object", "empty-string", "null", "missing"],
)
def test_blank_or_absent_arguments_mean_no_arguments(function):
    assert _parse_response(tool_call_body(function)).content == [ToolCall("call_1", "list_files", {})]


def test_arguments_sent_as_an_object_are_used_as_they_are():
    # arguments as an object, the way Ollama's own API sends them, instead of a JSON string
    body = tool_call_body({"name": "get_weather", "arguments": {"city": "Paris"}})
    assert _parse_response(body).content == [ToolCall("call_1", "get_weather", {"city": "Paris"})]


def test_arguments_that_are_not_json_keep_their_raw_text():
    # a reply cut off mid-arguments (llama-cpp-python's capped generations)
    body = tool_call_body({"name": "get_weather", "arguments": '{"city": "Par'})
    assert _parse_response(body).content == [ToolCall("call_1", "get_weather", {}, raw_arguments='{"city": "Par')]


def test_arguments_that_are_json_but_not_an_object_keep_their_raw_text():
    body = tool_call_body({"name": "get_weather", "arguments": '["Paris"]'})
    assert _parse_response(body).content == [ToolCall("call_1", "get_weather", {}, raw_arguments='["Paris"]')]


def test_tool_calls_without_ids_get_stable_ids_from_the_response():
    # Gemini's OpenAI endpoint sends "id": ""
    body = openai_body(
        {
            "content": None,
            "tool_calls": [
                {"id": "", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
                {"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}},
            ],
        },
        "tool_calls",
    )
    ids = [call.tool_call_id for call in _parse_response(body).tool_calls]
    assert ids == ["call_aeb09f97fce1_0", "call_4ce2fbbe8e10_1"]
    assert [call.tool_call_id for call in _parse_response(body).tool_calls] == ids


def test_generated_ids_differ_between_responses():
    first = tool_call_body({"name": "get_weather", "arguments": "{}"}, call_id="")
    second = {**first, "id": "chatcmpl-2"}
    assert _parse_response(first).tool_calls[0].tool_call_id != _parse_response(second).tool_calls[0].tool_call_id


def test_a_refusal_is_kept_apart_from_the_content():
    # OpenAI structured outputs: content null, refusal set
    body = openai_body({"content": None, "refusal": "I can't help with that."})
    response = _parse_response(body)
    assert (response.content, response.refusal) == ([], "I can't help with that.")


def test_an_empty_refusal_is_none():
    assert _parse_response(openai_body({"content": "Hi", "refusal": ""})).refusal is None


def test_reasoning_content_becomes_reasoning_not_text():
    # DeepSeek's reasoner
    body = openai_body({"content": "42", "reasoning_content": "6 times 7."})
    response = _parse_response(body)
    assert (response.content, response.text, response.reasoning) == (
        [Message("assistant", "42", reasoning_content="6 times 7.")],
        "42",
        "6 times 7.",
    )


def test_reasoning_is_read_when_there_is_no_reasoning_content():
    # Groq, OpenRouter, Ollama and vLLM name it "reasoning"
    assert _parse_response(openai_body({"content": "42", "reasoning": "6 times 7."})).reasoning == "6 times 7."


def test_reasoning_content_wins_over_reasoning():
    body = openai_body({"content": "42", "reasoning_content": "first", "reasoning": "second"})
    assert _parse_response(body).reasoning == "first"


def test_empty_reasoning_content_is_none():
    # LM Studio sends "reasoning_content": ""
    assert _parse_response(openai_body({"content": "Hi", "reasoning_content": ""})).reasoning is None


def test_missing_usage_is_none():
    # Cloudflare sends no usage
    body = openai_body({"content": "Hi"})
    del body["usage"]
    assert _parse_response(body).usage_metadata is None


def test_partial_usage_keeps_none_for_the_missing_count():
    body = openai_body({"content": "Hi"}, usage={"prompt_tokens": 10})
    assert _parse_response(body).usage_metadata == {"input_tokens": 10, "output_tokens": None}


@pytest.mark.parametrize("finish_reason", ["eos", "", "content_filter", "function_call"])
def test_finish_reason_is_kept_as_sent(finish_reason):
    # Together says "eos", Snowflake "", Azure "content_filter"
    assert _parse_response(openai_body({"content": "Hi"}, finish_reason)).finish_reason == finish_reason


def test_a_missing_finish_reason_is_none():
    # OpenRouter: a choice without the key
    body = openai_body({"content": "Hi"})
    del body["choices"][0]["finish_reason"]
    assert _parse_response(body).finish_reason is None


def test_finish_reason_length_marks_the_reply_truncated():
    response = _parse_response(openai_body({"content": "Once upon a"}, "length"))
    assert (response.finish_reason, response.is_truncated) == ("length", True)


def test_a_choice_without_a_message_gives_an_empty_reply():
    # Azure's content filter: finish_reason content_filter and no message key
    body = {"choices": [{"index": 0, "finish_reason": "content_filter"}]}
    assert _parse_response(body) == LlmResponse(finish_reason="content_filter")


def test_choice_index_zero_is_read_when_there_are_several():
    body = {
        "choices": [
            {"index": 1, "message": {"content": "second"}, "finish_reason": "stop"},
            {"index": 0, "message": {"content": "first"}, "finish_reason": "stop"},
        ]
    }
    assert _parse_response(body).text == "first"


def test_the_legacy_function_call_is_not_read_as_a_tool_call():
    # OpenAI's deprecated function calling: message.function_call, finish_reason function_call
    body = openai_body({"content": None, "function_call": {"name": "get_weather", "arguments": "{}"}}, "function_call")
    response = _parse_response(body)
    assert (response.content, response.finish_reason, response.error_message) == ([], "function_call", None)


@pytest.mark.parametrize("body", [{"choices": []}, {"id": "x"}, {"choices": None}], ids=["empty", "missing", "null"])
def test_a_body_without_choices_gives_an_error_message(body):
    assert _parse_response(body) == LlmResponse(error_message="response has no choices")


def test_a_body_that_is_not_an_object_gives_an_error_message():
    assert _parse_response(["not", "an", "object"]) == LlmResponse(
        error_message='response is not a JSON object: ["not", "an", "object"]'
    )


def test_an_error_object_in_a_200_body_gives_an_error_message():
    # OpenRouter can answer 200 with {"error": {...}}
    body = {"error": {"message": "Upstream timed out", "code": 502}}
    assert _parse_response(body) == LlmResponse(error_message="error in response: Upstream timed out")


def test_a_header_name_http_cannot_carry_is_refused_at_construction():
    with pytest.raises(ValueError, match="header name 'X Title' is not a valid HTTP header name"):
        LlmClient("m", "http://127.0.0.1:1/v1", headers={"X Title": "plainagent"})


def test_a_base_url_with_characters_beyond_ascii_is_refused_at_construction():
    with pytest.raises(ValueError, match="base_url must be ASCII"):
        LlmClient("m", "http://exämple.test/v1")


def test_instructions_given_as_one_string_become_one_system_message():
    assert _build_messages(LlmRequest("Be brief.", [Message("user", "Hi")])) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
    ]


def test_reasoning_content_beside_tool_calls_is_kept_in_an_empty_assistant_message():
    # DeepSeek V4 in thinking mode: no content, reasoning_content, then the tool call
    body = openai_body(
        {
            "content": None,
            "reasoning_content": "I need the weather.",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}],
        },
        "tool_calls",
    )
    assert _parse_response(body).content == [
        Message("assistant", "", reasoning_content="I need the weather."),
        ToolCall("c1", "w", {}),
    ]


def test_reasoning_content_is_sent_back_with_its_tool_calls():
    # DeepSeek refuses a thinking-mode tool turn without it: "The reasoning_content in the
    # thinking mode must be passed back to the API."
    reply = [Message("assistant", "", reasoning_content="I need the weather."), ToolCall("c1", "w", {})]
    assert _build_messages(LlmRequest(contents=[Message("user", "Weather?"), *reply])) == [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "I need the weather.",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}],
        },
    ]


def test_reasoning_under_another_name_is_not_sent_back():
    # Groq, OpenRouter and Ollama send "reasoning"; Groq refuses unknown message fields
    response = _parse_response(openai_body({"content": "42", "reasoning": "6 times 7."}))
    assert (response.content, response.reasoning) == ([Message("assistant", "42")], "6 times 7.")


def test_an_empty_reasoning_content_beside_tool_calls_is_kept_to_be_sent_back():
    # DeepSeek has been seen to send reasoning_content "" on a tool-call turn, and still wants it back
    body = openai_body(
        {
            "content": None,
            "reasoning_content": "",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}],
        },
        "tool_calls",
    )
    reply = _parse_response(body).content
    assert reply == [Message("assistant", "", reasoning_content=""), ToolCall("c1", "w", {})]
    assert _build_messages(LlmRequest(contents=reply))[0]["reasoning_content"] == ""
