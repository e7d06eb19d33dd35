"""The message dataclasses: their dict and JSON forms, argument parsing and validation."""

import pytest

from messages import (
    Message,
    ToolCall,
    ToolResult,
    conversation_from_json,
    conversation_to_json,
    message_from_dict,
    model_replies,
)

EVERY_KIND = [
    Message("system", "Be brief."),
    Message("user", "What is 2 + 3?"),
    Message("assistant", "Let me add them."),
    ToolCall("call_1", "add", {"a": 2, "b": 3}),
    ToolCall("call_2", "add", {}, raw_arguments='{"a": 2'),
    ToolResult("call_1", "add", "5"),
    ToolResult("call_2", "add", "arguments are not a JSON object", is_error=True),
]


def test_a_message_turns_into_its_dict_form():
    assert Message("user", "Hi").to_dict() == {"type": "message", "role": "user", "content": "Hi"}


def test_a_tool_call_turns_into_its_dict_form_without_raw_arguments():
    assert ToolCall("call_1", "add", {"a": 2}).to_dict() == {
        "type": "tool_call",
        "tool_call_id": "call_1",
        "name": "add",
        "arguments": {"a": 2},
    }


def test_a_tool_call_with_raw_arguments_keeps_them_in_its_dict_form():
    assert ToolCall("call_1", "add", {}, raw_arguments="{oops").to_dict() == {
        "type": "tool_call",
        "tool_call_id": "call_1",
        "name": "add",
        "arguments": {},
        "raw_arguments": "{oops",
    }


def test_a_tool_result_turns_into_its_dict_form():
    assert ToolResult("call_1", "add", "5").to_dict() == {
        "type": "tool_result",
        "tool_call_id": "call_1",
        "name": "add",
        "content": "5",
        "is_error": False,
    }


@pytest.mark.parametrize("message", EVERY_KIND, ids=repr)
def test_every_kind_round_trips_through_its_own_from_dict(message):
    assert type(message).from_dict(message.to_dict()) == message


@pytest.mark.parametrize("message", EVERY_KIND, ids=repr)
def test_every_kind_round_trips_through_message_from_dict(message):
    assert message_from_dict(message.to_dict()) == message


def test_a_conversation_round_trips_through_json():
    assert conversation_from_json(conversation_to_json(EVERY_KIND)) == EVERY_KIND


def test_conversation_json_is_an_array_of_message_dicts():
    text = conversation_to_json([Message("user", "Grüße"), ToolResult("call_1", "add", "5")])
    assert text == (
        '[{"type": "message", "role": "user", "content": "Grüße"}, '
        '{"type": "tool_result", "tool_call_id": "call_1", "name": "add", "content": "5", "is_error": false}]'
    )


def test_an_unknown_message_type_raises_naming_the_allowed_types():
    with pytest.raises(ValueError) as raised:
        message_from_dict({"type": "image", "url": "x"})
    assert str(raised.value) == "message type must be one of message, tool_call, tool_result; got 'image'"


def test_a_dict_without_a_type_raises_naming_the_allowed_types():
    with pytest.raises(ValueError) as raised:
        message_from_dict({"role": "user", "content": "Hi"})
    assert str(raised.value) == "message type must be one of message, tool_call, tool_result; got None"


def test_a_message_with_an_unknown_role_raises_naming_the_allowed_roles():
    with pytest.raises(ValueError) as raised:
        Message("tool", "5")
    assert str(raised.value) == "Message role must be one of system, user, assistant; got 'tool'"


def test_argument_text_holding_an_object_is_parsed():
    assert ToolCall.from_arguments_text("call_1", "add", '{"a": 2, "b": [3]}') == ToolCall(
        "call_1", "add", {"a": 2, "b": [3]}
    )


@pytest.mark.parametrize("text", ["", "   ", "\n\t "])
def test_blank_argument_text_means_no_arguments(text):
    assert ToolCall.from_arguments_text("call_1", "now", text) == ToolCall("call_1", "now", {})


def test_argument_text_that_is_not_json_is_kept_raw():
    assert ToolCall.from_arguments_text("call_1", "add", '{"a": 2') == ToolCall(
        "call_1", "add", {}, raw_arguments='{"a": 2'
    )


@pytest.mark.parametrize("text", ["[1, 2]", "42", '"a string"', "null"])
def test_argument_text_that_is_json_but_not_an_object_is_kept_raw(text):
    assert ToolCall.from_arguments_text("call_1", "add", text) == ToolCall("call_1", "add", {}, raw_arguments=text)


def test_an_assistant_message_with_reasoning_content_round_trips():
    message = Message("assistant", "42", reasoning_content="6 times 7.")
    assert message.to_dict() == {
        "type": "message",
        "role": "assistant",
        "content": "42",
        "reasoning_content": "6 times 7.",
    }
    assert message_from_dict(message.to_dict()) == message


def test_model_replies_groups_an_assistant_message_with_the_tool_calls_after_it():
    call_1, call_2 = ToolCall("c1", "a", {}), ToolCall("c2", "b", {})
    conversation = [
        Message("system", "s"),
        Message("user", "u"),
        Message("assistant", "Checking."),
        call_1,
        call_2,
        ToolResult("c1", "a", "1"),
        ToolResult("c2", "b", "2"),
        Message("assistant", "Done."),
    ]
    assert model_replies(conversation) == [
        [Message("assistant", "Checking."), call_1, call_2],
        [Message("assistant", "Done.")],
    ]
