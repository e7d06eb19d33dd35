"""FakeLlm: scripted replies, recorded requests, a server's conversation checks, streaming."""

import pytest

from agent import LlmCall, agent_life_cycle
from fake_llm import FakeLlm, FakeLlmScriptError
from llm_client import LlmRequest, LlmResponse
from messages import Message, ToolCall, ToolResult
from tools import tool

QUESTION = [Message("system", "Be brief."), Message("user", "2 + 3?")]
CALL = ToolCall("call_1", "add", {"a": 2, "b": 3})


def ask(fake, contents, on_text=None):
    return fake.generate(LlmRequest(contents=contents), on_text=on_text)


def test_a_scripted_list_replies_in_order():
    fake = FakeLlm([CALL, "It is 5."])
    first = ask(fake, QUESTION)
    second = ask(fake, QUESTION + [CALL, ToolResult("call_1", "add", "5")])
    assert (first, second) == (
        LlmResponse(content=[CALL], finish_reason="tool_calls"),
        LlmResponse(content=[Message("assistant", "It is 5.")], finish_reason="stop"),
    )


def test_a_scripted_reply_may_mix_text_and_tool_calls():
    fake = FakeLlm([["Adding.", CALL, ToolCall("call_2", "add", {"a": 1, "b": 1})]])
    assert ask(fake, QUESTION).content == [
        Message("assistant", "Adding."),
        CALL,
        ToolCall("call_2", "add", {"a": 1, "b": 1}),
    ]


def test_a_scripted_llm_response_is_returned_as_it_is():
    response = LlmResponse(content=[Message("assistant", "Hi")], usage_metadata={"input_tokens": 3, "output_tokens": 1})
    assert ask(FakeLlm([response]), QUESTION) is response


def test_a_function_script_answers_from_the_request():
    fake = FakeLlm(lambda request: f"You sent {len(request.contents)} messages.")
    assert ask(fake, QUESTION).text == "You sent 2 messages."


def test_every_request_is_recorded():
    fake = FakeLlm(["One.", "Two."])
    first, second = LlmRequest(contents=QUESTION), LlmRequest(contents=QUESTION + [Message("assistant", "?")])
    fake.generate(first)
    fake.generate(second)
    assert fake.requests == [first, second]


def test_running_past_the_script_raises_naming_the_call_number():
    fake = FakeLlm(["Only."])
    ask(fake, QUESTION)
    with pytest.raises(FakeLlmScriptError, match="^FakeLlm was called 2 times but its script has only 1 replies; "):
        ask(fake, QUESTION)


def test_an_orphan_tool_result_is_rejected_like_a_server_would():
    response = ask(FakeLlm(["Never."]), QUESTION + [ToolResult("call_9", "add", "5")])
    assert (response.status_code, response.error_message) == (
        400,
        "HTTP 400: messages[2]: tool result for 'call_9' does not answer a tool call of the preceding assistant message",
    )


def test_a_tool_call_left_without_a_result_is_rejected():
    response = ask(FakeLlm(["Never."]), QUESTION + [CALL, Message("user", "Well?")])
    assert (response.status_code, response.error_message) == (
        400,
        "HTTP 400: messages[3]: tool calls 'call_1' have no tool result; "
        "each tool call needs one before the conversation goes on",
    )


def test_a_conversation_ending_in_an_unanswered_tool_call_is_rejected():
    response = ask(FakeLlm(["Never."]), QUESTION + [CALL])
    assert response.error_message == (
        "HTTP 400: messages[3]: tool calls 'call_1' have no tool result; "
        "each tool call needs one before the conversation goes on"
    )


def test_a_new_reply_before_every_call_of_the_last_is_answered_is_rejected():
    second = ToolCall("call_2", "add", {"a": 1, "b": 1})
    response = ask(
        FakeLlm(["Never."]), QUESTION + [CALL, second, ToolResult("call_1", "add", "5"), ToolCall("call_3", "add", {})]
    )
    assert response.error_message == (
        "HTTP 400: messages[5]: tool calls 'call_2' have no tool result; "
        "each tool call needs one before the conversation goes on"
    )


def test_a_system_message_after_the_conversation_began_is_rejected():
    response = ask(FakeLlm(["Never."]), QUESTION + [Message("system", "Be verbose.")])
    assert response.error_message == "HTTP 400: messages[2]: a system message must come before the conversation begins"


def test_a_duplicate_tool_call_id_is_rejected():
    response = ask(FakeLlm(["Never."]), QUESTION + [CALL, ToolCall("call_1", "add", {"a": 1, "b": 1})])
    assert response.error_message == "HTTP 400: messages[3]: duplicate tool call id 'call_1'"


def test_a_rejected_request_is_still_recorded():
    fake = FakeLlm(["Never."])
    request = LlmRequest(contents=[ToolResult("call_9", "add", "5")])
    fake.generate(request)
    assert fake.requests == [request]


def test_a_rejected_request_uses_up_no_scripted_reply():
    fake = FakeLlm(["First.", "Second."])
    ask(fake, [ToolResult("call_9", "add", "5")])
    assert ask(fake, QUESTION).text == "First."


def test_a_valid_multi_step_conversation_is_accepted():
    contents = [
        Message("system", "Be brief."),
        Message("system", "Use tools."),
        Message("user", "2 + 3, then double it?"),
        Message("assistant", "Adding."),
        CALL,
        ToolCall("call_2", "add", {"a": 0, "b": 0}),
        ToolResult("call_2", "add", "0"),
        ToolResult("call_1", "add", "5"),
        ToolCall("call_3", "add", {"a": 5, "b": 5}),
        ToolResult("call_3", "add", "10"),
        Message("assistant", "It is 10."),
        Message("user", "Thanks."),
    ]
    assert ask(FakeLlm(["You're welcome."]), contents) == LlmResponse(
        content=[Message("assistant", "You're welcome.")], finish_reason="stop"
    )


def test_text_streams_in_pieces_that_join_to_the_whole_text():
    pieces = []
    response = ask(FakeLlm(["It is  five,\nexactly. "]), QUESTION, on_text=pieces.append)
    assert (pieces, response.text) == (["It ", "is  ", "five,\n", "exactly. "], "It is  five,\nexactly. ")


def test_a_reply_without_text_streams_nothing():
    pieces = []
    ask(FakeLlm([CALL]), QUESTION, on_text=pieces.append)
    assert pieces == []


def test_replaying_scripts_the_model_replies_of_a_conversation():
    conversation = QUESTION + [
        Message("assistant", "Adding."),
        CALL,
        ToolResult("call_1", "add", "5"),
        Message("assistant", "It is 5."),
    ]
    assert FakeLlm.replaying(conversation).script == [
        [Message("assistant", "Adding."), CALL],
        [Message("assistant", "It is 5.")],
    ]


def test_replaying_a_run_through_the_agent_loop_gives_the_same_conversation():
    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    script = [
        ["Adding.", CALL, ToolCall("call_2", "add", {"a": 1, "b": "x"})],
        ToolCall("call_3", "add", {"a": 5, "b": 5}),
        "It is 10.",
    ]
    original = agent_life_cycle("Be brief.", "2 + 3, doubled?", LlmCall(FakeLlm(script)), tool_set={"add": add})
    replayed = agent_life_cycle(
        "Be brief.", "2 + 3, doubled?", LlmCall(FakeLlm.replaying(original)), tool_set={"add": add}
    )
    assert replayed == original
