"""agent_life_cycle: the loop, its tool-error policy, its guards, and LlmCall over a FakeLlm."""

import threading
import types

import pytest

import agent
from agent import AgentStopped, LlmCall, agent_life_cycle
from fake_llm import FakeLlm
from llm_client import LlmResponse
from messages import Message, ToolCall, ToolResult
from tools import make_tool_set, tool

SYSTEM, USER = Message("system", "Be brief."), Message("user", "Say hi.")


@tool
def echo(text: str) -> str:
    """Say the text back."""
    return text


@tool
def fail() -> str:
    """Always fail."""
    raise RuntimeError("disk on fire")


TOOLS = make_tool_set([echo, fail])


def run(script, **options):
    """Run the loop on a FakeLlm with ``script``; return (conversation, fake)."""
    fake = FakeLlm(script)
    conversation = agent_life_cycle("Be brief.", "Say hi.", LlmCall(fake), tool_set=TOOLS, **options)
    return conversation, fake


def stop_of(script, **options):
    """Run the loop on a FakeLlm with ``script`` expecting it to stop; return the AgentStopped."""
    with pytest.raises(AgentStopped) as raised:
        run(script, **options)
    return raised.value


def test_a_reply_without_tool_calls_ends_the_run_with_the_whole_conversation():
    conversation, _ = run([ToolCall("call_1", "echo", {"text": "hi"}), "hi"])
    assert conversation == [
        SYSTEM,
        USER,
        ToolCall("call_1", "echo", {"text": "hi"}),
        ToolResult("call_1", "echo", "hi"),
        Message("assistant", "hi"),
    ]


def test_the_model_is_shown_the_conversation_so_far():
    _, fake = run([ToolCall("call_1", "echo", {"text": "hi"}), "hi"])
    assert [request.contents for request in fake.requests] == [
        [SYSTEM, USER],
        [SYSTEM, USER, ToolCall("call_1", "echo", {"text": "hi"}), ToolResult("call_1", "echo", "hi")],
    ]


def test_the_model_is_offered_the_tools():
    _, fake = run(["hi"])
    assert fake.requests[0].tools == [echo, fail]


def test_a_plain_function_works_as_llm_call():
    def llm_call(conversation, tool_set):
        if isinstance(conversation[-1], ToolResult):
            return [Message("assistant", f"It said {conversation[-1].content}.")]
        return [ToolCall("call_1", "echo", {"text": "hi"})]

    conversation = agent_life_cycle(None, "Say hi.", llm_call, tool_set=TOOLS)
    assert conversation == [
        USER,
        ToolCall("call_1", "echo", {"text": "hi"}),
        ToolResult("call_1", "echo", "hi"),
        Message("assistant", "It said hi."),
    ]


def test_a_system_prompt_equal_to_the_task_stays_a_system_message():
    text = "Answer."
    conversation = agent_life_cycle(text, text, lambda conversation, tool_set: [Message("assistant", "Done.")])
    assert conversation[:2] == [Message("system", "Answer."), Message("user", "Answer.")]


def test_two_tool_calls_of_one_reply_run_at_the_same_time_and_keep_call_order():
    barrier = threading.Barrier(2, timeout=5)

    @tool
    def left() -> str:
        """Meet right."""
        barrier.wait()
        return "left done"

    @tool
    def right() -> str:
        """Meet left."""
        barrier.wait()
        return "right done"

    fake = FakeLlm([[ToolCall("call_1", "right", {}), ToolCall("call_2", "left", {})], "Both done."])
    conversation = agent_life_cycle(None, "Go.", LlmCall(fake), tool_set=make_tool_set([left, right]))
    assert conversation[3:5] == [ToolResult("call_1", "right", "right done"), ToolResult("call_2", "left", "left done")]


@pytest.mark.parametrize(
    "bad_call, error",
    [
        (ToolCall("call_1", "serach", {}), "unknown tool 'serach'; known tools: echo, fail"),
        (
            ToolCall.from_arguments_text("call_1", "fail", "{oops"),
            "arguments for tool 'fail' are not a JSON object: \"{oops\"; expected a JSON object matching "
            '{"type": "object", "properties": {}, "required": [], "additionalProperties": false}',
        ),
        (
            ToolCall("call_1", "echo", {"text": 5}),
            "invalid arguments for tool 'echo': argument 'text': expected string, got integer 5",
        ),
        (ToolCall("call_1", "fail", {}), "tool 'fail' raised RuntimeError: disk on fire"),
    ],
    ids=["unknown tool", "arguments not JSON", "arguments break the schema", "tool raised"],
)
def test_a_model_fixable_tool_error_reaches_the_model_as_an_error_result_and_the_loop_goes_on(bad_call, error):
    conversation, fake = run([bad_call, "Sorry."])
    assert (fake.requests[1].contents[-1], conversation[-1]) == (
        ToolResult("call_1", bad_call.name, error, is_error=True),
        Message("assistant", "Sorry."),
    )


def test_the_step_limit_stops_a_model_that_never_stops_calling_tools():
    def llm_call(conversation, tool_set):
        return [ToolCall(f"call_{len(conversation)}", "echo", {"text": str(len(conversation))})]

    with pytest.raises(AgentStopped) as raised:
        agent_life_cycle(None, "Go.", llm_call, tool_set=TOOLS, max_steps=2)
    stopped = raised.value
    assert (stopped.reason, stopped.detail, stopped.conversation) == (
        "step_limit",
        "no answer after 2 model calls (max_steps=2)",
        [
            Message("user", "Go."),
            ToolCall("call_1", "echo", {"text": "1"}),
            ToolResult("call_1", "echo", "1"),
            ToolCall("call_3", "echo", {"text": "3"}),
            ToolResult("call_3", "echo", "3"),
        ],
    )


def test_an_llm_call_that_raises_stops_the_run_with_the_error_as_cause():
    error = ConnectionError("connection refused")

    def llm_call(conversation, tool_set):
        raise error

    with pytest.raises(AgentStopped) as raised:
        agent_life_cycle("Be brief.", "Say hi.", llm_call)
    stopped = raised.value
    assert (stopped.reason, stopped.detail, stopped.conversation, stopped.__cause__) == (
        "llm_error",
        "llm_call raised ConnectionError: connection refused",
        [SYSTEM, USER],
        error,
    )


def test_a_failed_model_call_stops_the_run_with_llm_error():
    stopped = stop_of(
        [
            ToolCall("call_1", "echo", {"text": "hi"}),
            LlmResponse(error_message="HTTP 500: upstream down", status_code=500),
        ]
    )
    assert (stopped.reason, stopped.detail, stopped.conversation) == (
        "llm_error",
        "HTTP 500: upstream down",
        [SYSTEM, USER, ToolCall("call_1", "echo", {"text": "hi"}), ToolResult("call_1", "echo", "hi")],
    )


def test_a_failed_model_call_keeps_what_arrived_as_partial():
    stopped = stop_of([LlmResponse(content=[Message("assistant", "Hel")], error_message="stream broke")])
    assert (stopped.reason, stopped.partial, stopped.conversation) == (
        "llm_error",
        [Message("assistant", "Hel")],
        [SYSTEM, USER],
    )


def test_a_truncated_reply_stops_the_run_without_running_its_tool_calls():
    calls = []

    @tool
    def record(text: str) -> str:
        """Record the text."""
        calls.append(text)
        return "recorded"

    cut = ToolCall.from_arguments_text("call_1", "record", '{"text": "hal')
    fake = FakeLlm([LlmResponse(content=[cut], is_truncated=True, finish_reason="length")])
    with pytest.raises(AgentStopped) as raised:
        agent_life_cycle("Be brief.", "Say hi.", LlmCall(fake), tool_set=make_tool_set([record]))
    stopped = raised.value
    assert (stopped.reason, stopped.detail, stopped.partial, stopped.conversation, calls) == (
        "truncated",
        "finish_reason 'length'",
        [cut],
        [SYSTEM, USER],
        [],
    )


def test_on_message_sees_every_appended_message_in_order():
    seen = []
    conversation, _ = run(
        [[Message("assistant", "Echoing."), ToolCall("call_1", "echo", {"text": "hi"})], "hi"], on_message=seen.append
    )
    assert seen == conversation


def test_on_text_is_passed_to_the_model_call_and_receives_the_streamed_text():
    pieces = []
    run(["Hi there, friend."], on_text=pieces.append)
    assert pieces == ["Hi ", "there, ", "friend."]


def test_history_continues_a_previous_conversation_with_a_new_user_message():
    previous = [SYSTEM, USER, Message("assistant", "Hi.")]
    fake = FakeLlm(["Bye."])
    conversation = agent_life_cycle("Be brief.", "Now say bye.", LlmCall(fake), history=previous)
    assert conversation == previous + [Message("user", "Now say bye."), Message("assistant", "Bye.")]


def test_continuing_a_conversation_leaves_the_history_list_unchanged():
    previous = [SYSTEM, USER, Message("assistant", "Hi.")]
    agent_life_cycle("Be brief.", "Now say bye.", LlmCall(FakeLlm(["Bye."])), history=previous)
    assert previous == [SYSTEM, USER, Message("assistant", "Hi.")]


def test_unanswered_tool_calls_in_the_history_are_run_first():
    previous = [
        SYSTEM,
        USER,
        ToolCall("call_1", "echo", {"text": "hi"}),
        ToolCall("call_2", "echo", {"text": "ho"}),
        ToolResult("call_2", "echo", "ho"),
    ]
    fake = FakeLlm(["hi ho"])
    conversation = agent_life_cycle("Be brief.", None, LlmCall(fake), tool_set=TOOLS, history=previous)
    assert conversation == previous + [ToolResult("call_1", "echo", "hi"), Message("assistant", "hi ho")]


def fake_clock(monkeypatch, *readings):
    """Make the agent module's clock return ``readings``, one per call."""
    ticks = iter(readings)
    monkeypatch.setattr(agent, "time", types.SimpleNamespace(monotonic=lambda: next(ticks)))


def test_a_zero_deadline_stops_the_run_before_the_first_model_call(monkeypatch):
    fake_clock(monkeypatch, 100.0, 100.001)
    stopped = stop_of(["Never."], deadline_seconds=0)
    assert (stopped.reason, stopped.detail, stopped.conversation) == (
        "deadline",
        "the run passed its deadline of 0 s",
        [SYSTEM, USER],
    )


def test_the_deadline_stops_the_run_once_the_time_is_past_it(monkeypatch):
    fake_clock(monkeypatch, 100.0, 104.0, 110.5)
    stopped = stop_of([ToolCall("call_1", "echo", {"text": "hi"}), "Never."], deadline_seconds=10)
    assert (stopped.reason, stopped.detail, stopped.conversation) == (
        "deadline",
        "the run passed its deadline of 10 s",
        [SYSTEM, USER, ToolCall("call_1", "echo", {"text": "hi"}), ToolResult("call_1", "echo", "hi")],
    )


def test_a_run_within_its_deadline_ends_normally(monkeypatch):
    fake_clock(monkeypatch, 100.0, 110.0)
    conversation, _ = run(["Hi."], deadline_seconds=10)
    assert conversation == [SYSTEM, USER, Message("assistant", "Hi.")]


REPEAT_NOTE = (
    "\n[note: this exact tool call has now been made 2 times in a row and its result will not change; "
    "use the result, try something different, or answer. The run stops if the same call comes again.]"
)


def test_a_tool_call_repeated_up_to_the_limit_carries_a_note_in_its_result():
    conversation, _ = run(
        [ToolCall("call_1", "echo", {"text": "hi"}), ToolCall("call_2", "echo", {"text": "hi"}), "hi"], max_repeats=2
    )
    assert [m for m in conversation if isinstance(m, ToolResult)] == [
        ToolResult("call_1", "echo", "hi"),
        ToolResult("call_2", "echo", "hi" + REPEAT_NOTE),
    ]


def test_a_tool_call_repeated_past_the_limit_stops_the_run():
    stopped = stop_of([ToolCall(f"call_{n}", "echo", {"text": "hi"}) for n in (1, 2, 3)], max_repeats=2)
    assert (stopped.reason, stopped.detail, stopped.conversation[-3:]) == (
        "repeated_tool_call",
        "the same tool calls were asked for 3 times in a row",
        [
            ToolResult("call_2", "echo", "hi" + REPEAT_NOTE),
            ToolCall("call_3", "echo", {"text": "hi"}),
            ToolResult(
                "call_3", "echo", "not executed: it repeats the previous calls exactly, so the run was stopped", True
            ),
        ],
    )


def test_a_run_stopped_for_repeating_itself_can_be_continued_with_a_new_message():
    stopped = stop_of([ToolCall(f"call_{n}", "echo", {"text": "hi"}) for n in (1, 2, 3)], max_repeats=2)
    fake = FakeLlm(["All right."])
    conversation = agent_life_cycle(
        None, "Stop repeating.", LlmCall(fake), tool_set=TOOLS, history=stopped.conversation
    )
    assert conversation[-2:] == [Message("user", "Stop repeating."), Message("assistant", "All right.")]


def test_pending_tool_calls_are_answered_before_a_new_user_message():
    history = [Message("system", "s"), Message("user", "u"), ToolCall("call_1", "echo", {"text": "a"})]
    fake = FakeLlm(["Done."])
    conversation = agent_life_cycle(None, "And then?", LlmCall(fake), tool_set=TOOLS, history=history)
    assert conversation[3:] == [
        ToolResult("call_1", "echo", "a"),
        Message("user", "And then?"),
        Message("assistant", "Done."),
    ]


def test_a_plugged_in_tool_call_that_raises_gives_an_error_result():
    def tool_call(call, tool_set):
        raise RuntimeError("sandbox is down")

    fake = FakeLlm([ToolCall("call_1", "echo", {"text": "a"}), "ok"])
    conversation = agent_life_cycle("s", "u", LlmCall(fake), tool_call, tool_set=TOOLS)
    assert conversation[3] == ToolResult("call_1", "echo", "tool_call raised RuntimeError: sandbox is down", True)


def test_a_changed_tool_call_resets_the_repeat_count():
    script = [ToolCall(f"call_{n}", "echo", {"text": text}) for n, text in enumerate(["a", "a", "b", "b"])] + ["Done."]
    conversation, _ = run(script, max_repeats=2)
    assert conversation[-1] == Message("assistant", "Done.")


def test_the_token_budget_stops_the_run_once_reported_usage_reaches_it():
    usage = {"input_tokens": 70, "output_tokens": 30}
    fake = FakeLlm([LlmResponse(content=[ToolCall("call_1", "echo", {"text": "hi"})], usage_metadata=usage), "Never."])
    llm_call = LlmCall(fake, token_budget=100)
    with pytest.raises(AgentStopped) as raised:
        agent_life_cycle("Be brief.", "Say hi.", llm_call, tool_set=TOOLS)
    stopped = raised.value
    assert (stopped.reason, stopped.detail, len(fake.requests), llm_call.usage) == (
        "token_budget",
        "100 tokens used, budget 100",
        1,
        {"input_tokens": 70, "output_tokens": 30},
    )


def test_llm_call_adds_up_reported_usage_and_skips_missing_counts():
    fake = FakeLlm(
        [
            LlmResponse(
                content=[ToolCall("call_1", "echo", {"text": "hi"})],
                usage_metadata={"input_tokens": 10, "output_tokens": None},
            ),
            LlmResponse(content=[Message("assistant", "hi")], usage_metadata={"input_tokens": 20, "output_tokens": 5}),
        ]
    )
    llm_call = LlmCall(fake)
    agent_life_cycle("Be brief.", "Say hi.", llm_call, tool_set=TOOLS)
    assert llm_call.usage == {"input_tokens": 30, "output_tokens": 5}


def test_llm_call_asks_for_auto_tool_choice_only_when_there_are_tools():
    with_tools, without_tools = FakeLlm(["Hi."]), FakeLlm(["Hi."])
    agent_life_cycle(None, "Hi.", LlmCall(with_tools), tool_set=TOOLS)
    agent_life_cycle(None, "Hi.", LlmCall(without_tools))
    assert (with_tools.requests[0].tool_choice, without_tools.requests[0].tool_choice) == ("auto", None)


def test_past_max_tool_rounds_the_model_is_asked_to_answer_without_tools():
    script = [ToolCall("call_1", "echo", {"text": "a"}), ToolCall("call_2", "echo", {"text": "b"}), "done"]
    fake = FakeLlm(script)
    agent_life_cycle("Be brief.", "Say hi.", LlmCall(fake, max_tool_rounds=2), tool_set=TOOLS)
    assert [request.tool_choice for request in fake.requests] == ["auto", "auto", "none"]


def test_tool_rounds_are_counted_from_the_last_user_message():
    history = [
        Message("system", "s"),
        Message("user", "u"),
        ToolCall("call_1", "echo", {"text": "a"}),
        ToolResult("call_1", "echo", "a"),
        Message("assistant", "a"),
    ]
    fake = FakeLlm(["again"])
    agent_life_cycle(None, "Once more.", LlmCall(fake, max_tool_rounds=1), tool_set=TOOLS, history=history)
    assert fake.requests[0].tool_choice == "auto"


def test_a_plain_list_of_tools_works_as_the_tool_set():
    fake = FakeLlm([ToolCall("call_1", "echo", {"text": "a"}), "done"])
    conversation = agent_life_cycle("s", "u", LlmCall(fake), tool_set=list(TOOLS.values()))
    assert conversation[3] == ToolResult("call_1", "echo", "a")
    assert [tool.name for tool in fake.requests[0].tools] == ["echo", "fail"]
