"""AgentLauncher: task specs checked and launched, sub-agents, nesting depth and usage."""

import json

import pytest

from agent import DEMO_TOOLS, AgentLauncher, AgentStopped, calculator, current_time, load_spec
from fake_llm import FakeLlm
from llm_client import LlmResponse
from messages import Message, ToolCall, ToolResult

DEFAULT_SYSTEM = Message("system", "You are a helpful assistant. Use the tools when they help; answer briefly.")
ALLOWED_FIELDS = (
    "task, system_prompt, tools, model, base_url, api_key_env, api_key_header, options, max_steps, "
    "deadline_seconds, token_budget, max_tool_rounds, allow_subagents"
)


def launch(spec, script, **options):
    """Launch ``spec`` on a FakeLlm with ``script``; return (conversation, fake, launcher)."""
    fake = FakeLlm(script)
    launcher = AgentLauncher(DEMO_TOOLS, client=fake, **options)
    return launcher.launch(spec), fake, launcher


def tool_names(request):
    return [offered.name for offered in request.tools]


def spec_error(spec):
    """Return the message of the ValueError that launching ``spec`` raises."""
    with pytest.raises(ValueError) as raised:
        AgentLauncher(DEMO_TOOLS, client=FakeLlm([])).launch(spec)
    return str(raised.value)


def test_a_spec_dict_launches_an_agent_with_the_default_prompt_and_every_tool():
    conversation, fake, _ = launch({"task": "Say hi."}, ["Hi."])
    assert (conversation, tool_names(fake.requests[0])) == (
        [DEFAULT_SYSTEM, Message("user", "Say hi."), Message("assistant", "Hi.")],
        ["calculator", "current_time"],
    )


def test_a_spec_file_launches_an_agent(tmp_path):
    path = tmp_path / "spec.json"
    path.write_text(
        json.dumps({"task": "Add.", "system_prompt": "Only add.", "tools": ["calculator"]}), encoding="utf-8"
    )
    conversation, fake, _ = launch(str(path), ["Done."])
    assert (conversation, fake.requests[0].tools) == (
        [Message("system", "Only add."), Message("user", "Add."), Message("assistant", "Done.")],
        [calculator],
    )


def test_the_spec_step_limit_reaches_the_loop():
    with pytest.raises(AgentStopped) as raised:
        launch({"task": "Add.", "max_steps": 1}, [ToolCall("call_1", "calculator", {"expression": "1 + 1"})])
    assert (raised.value.reason, raised.value.detail) == ("step_limit", "no answer after 1 model calls (max_steps=1)")


def test_the_spec_token_budget_reaches_the_model_call():
    used = LlmResponse(
        content=[ToolCall("call_1", "calculator", {"expression": "1"})],
        usage_metadata={"input_tokens": 9, "output_tokens": 1},
    )
    with pytest.raises(AgentStopped) as raised:
        launch({"task": "Add.", "token_budget": 10}, [used])
    assert (raised.value.reason, raised.value.detail) == ("token_budget", "10 tokens used, budget 10")


def test_a_spec_without_a_task_is_refused_naming_the_field():
    assert spec_error({"model": "m"}) == "spec field 'task' is required"


def test_an_unknown_spec_field_is_refused_listing_the_allowed_fields():
    assert (
        spec_error({"task": "x", "colour": "red"}) == f"unknown spec field 'colour'; allowed fields: {ALLOWED_FIELDS}"
    )


def test_a_spec_field_of_the_wrong_type_is_refused_naming_the_allowed_type():
    assert spec_error({"task": "x", "max_steps": "20"}) == "spec field 'max_steps' must be int; got str"


def test_a_bool_where_an_int_is_expected_is_refused():
    assert spec_error({"task": "x", "max_steps": True}) == "spec field 'max_steps' must be int; got bool"


def test_a_wrong_type_for_an_optional_field_names_null_as_allowed():
    assert spec_error({"task": "x", "deadline_seconds": "soon"}) == (
        "spec field 'deadline_seconds' must be int or float or null; got str"
    )


def test_an_unknown_tool_in_a_spec_is_refused_listing_the_allowed_tools():
    assert spec_error({"task": "x", "tools": ["serach"]}) == (
        "spec field 'tools': unknown tool 'serach'; allowed tools: calculator, current_time"
    )


def test_an_api_key_in_a_spec_is_refused():
    assert spec_error({"task": "x", "api_key": "sk-secret"}) == (
        "spec field 'api_key': keys do not belong in specs; name the variable in 'api_key_env'"
    )


def test_a_spec_file_that_is_not_a_json_object_is_refused(tmp_path):
    path = tmp_path / "spec.json"
    path.write_text('["task"]', encoding="utf-8")
    assert spec_error(str(path)) == f"{path}: a task spec must be a JSON object"


def test_a_tool_named_launch_agent_is_refused_by_the_launcher():
    with pytest.raises(ValueError) as raised:
        AgentLauncher({"launch_agent": calculator, "current_time": current_time})
    assert str(raised.value) == "the tool name 'launch_agent' is the launcher's own; rename that tool"


def test_without_allow_subagents_there_is_no_launch_agent_tool():
    _, fake, _ = launch({"task": "x"}, ["Done."])
    assert "launch_agent" not in tool_names(fake.requests[0])


def test_launch_agent_returns_the_sub_agents_final_answer():
    script = [ToolCall("call_1", "launch_agent", {"task": "What is 2 + 2?"}), "4", "The sub-agent says 4."]
    conversation, fake, _ = launch({"task": "Delegate.", "allow_subagents": True}, script)
    assert (conversation[3], fake.requests[1].contents) == (
        ToolResult("call_1", "launch_agent", "4"),
        [DEFAULT_SYSTEM, Message("user", "What is 2 + 2?")],
    )


def test_a_sub_agent_may_be_given_fewer_tools():
    script = [ToolCall("call_1", "launch_agent", {"task": "Add.", "tools": ["calculator"]}), "2", "Done."]
    _, fake, _ = launch({"task": "Delegate.", "allow_subagents": True}, script, max_depth=1)
    assert tool_names(fake.requests[1]) == ["calculator"]


def test_at_max_depth_the_launch_agent_tool_is_not_offered():
    script = [ToolCall("call_1", "launch_agent", {"task": "Sub."}), "sub done", "top done"]
    _, fake, _ = launch({"task": "Delegate.", "allow_subagents": True}, script, max_depth=1)
    assert [tool_names(request) for request in fake.requests] == [
        ["calculator", "current_time", "launch_agent"],
        ["calculator", "current_time"],
        ["calculator", "current_time", "launch_agent"],
    ]


def test_sub_agents_nest_down_to_max_depth():
    script = [
        ToolCall("call_1", "launch_agent", {"task": "Level 1."}),
        ToolCall("call_2", "launch_agent", {"task": "Level 2."}),
        "level 2 done",
        "level 1 done",
        "top done",
    ]
    _, fake, _ = launch({"task": "Delegate.", "allow_subagents": True}, script, max_depth=2)
    assert ["launch_agent" in tool_names(request) for request in fake.requests] == [True, True, False, True, True]


def test_only_the_top_level_agent_reaches_on_message():
    seen = []
    script = [ToolCall("call_1", "launch_agent", {"task": "Sub."}), "sub done", "top done"]
    launch({"task": "Delegate.", "allow_subagents": True}, script, on_message=seen.append)
    assert seen == [
        DEFAULT_SYSTEM,
        Message("user", "Delegate."),
        ToolCall("call_1", "launch_agent", {"task": "Sub."}),
        ToolResult("call_1", "launch_agent", "sub done"),
        Message("assistant", "top done"),
    ]


def test_usage_adds_up_over_the_agent_and_its_sub_agents():
    def used(content, input_tokens, output_tokens):
        return LlmResponse(
            content=content, usage_metadata={"input_tokens": input_tokens, "output_tokens": output_tokens}
        )

    script = [
        used([ToolCall("call_1", "launch_agent", {"task": "Sub."})], 100, 10),
        used([Message("assistant", "sub done")], 20, 2),
        used([Message("assistant", "top done")], 300, 3),
    ]
    _, _, launcher = launch({"task": "Delegate.", "allow_subagents": True}, script)
    assert launcher.usage == {"input_tokens": 420, "output_tokens": 15}


def test_a_launch_continues_a_history_with_a_new_user_message():
    history = [DEFAULT_SYSTEM, Message("user", "Say hi."), Message("assistant", "Hi.")]
    fake = FakeLlm(["Bye."])
    conversation = AgentLauncher(DEMO_TOOLS, client=fake).launch(
        {"task": "Say hi."}, history=history, user_message="Now bye."
    )
    assert conversation == history + [Message("user", "Now bye."), Message("assistant", "Bye.")]


def test_options_may_not_set_what_a_spec_field_sets():
    assert spec_error({"task": "x", "options": {"base_url": "http://h"}}) == (
        "spec field 'options': 'base_url' is set by its own spec field, not in options"
    )


def test_a_client_setting_of_the_wrong_type_in_options_is_refused_naming_it():
    assert spec_error({"task": "x", "options": {"max_retries": "2"}}) == (
        "spec field 'options': 'max_retries' must be int; got str"
    )


def test_a_header_that_would_hold_a_key_is_refused_in_a_spec():
    assert spec_error({"task": "x", "options": {"headers": {"api-key": "secret"}}}) == (
        "spec field 'options': headers 'api-key' would put a secret in the spec; "
        "name the key's variable in 'api_key_env' (and its header in 'api_key_header')"
    )


def test_a_query_parameter_that_would_hold_a_key_is_refused_in_a_spec():
    assert spec_error({"task": "x", "options": {"query": {"key": "AIza-secret"}}}) == (
        "spec field 'options': query 'key' would put a secret in the spec; "
        "name the key's variable in 'api_key_env' (and its header in 'api_key_header')"
    )


def test_options_may_not_hold_the_clients_sleep_function():
    assert spec_error({"task": "x", "options": {"sleep": 1}}) == (
        "spec field 'options': 'sleep' is a function; a spec cannot hold one"
    )


def test_api_key_header_reaches_the_client_with_the_key_from_the_environment(monkeypatch):
    monkeypatch.setenv("AZURE_TEST_KEY", "azure-secret-0123")
    spec = load_spec({"task": "x", "api_key_env": "AZURE_TEST_KEY", "api_key_header": "api-key"}, ["calculator"])
    client = AgentLauncher(DEMO_TOOLS).client_for(spec)
    assert (client.api_key, client.api_key_header) == ("azure-secret-0123", "api-key")


def test_a_refusal_becomes_the_assistants_answer():
    refused = LlmResponse(refusal="I can't help with that.", finish_reason="stop")
    conversation, _, _ = launch({"task": "Do a bad thing."}, [refused])
    assert conversation[-1] == Message("assistant", "I can't help with that.")


def test_a_filtered_reply_stops_the_run_with_content_filter():
    filtered = LlmResponse(content=[Message("assistant", "Par")], finish_reason="content_filter")
    with pytest.raises(AgentStopped) as raised:
        launch({"task": "x"}, [filtered])
    assert (raised.value.reason, raised.value.partial) == ("content_filter", [Message("assistant", "Par")])
