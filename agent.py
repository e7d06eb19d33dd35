"""The agent loop, the launcher that builds agents from task specs, and the command line.

An agent is a loop: send the conversation to the model, run the tool calls it asks for,
append the results, repeat until it answers without a tool call. ``agent_life_cycle`` is
that loop, the only one. ``llm_call(conversation, tool_set) -> new messages`` is any
function; ``LlmCall`` makes one from an ``LlmClient`` (or a ``FakeLlm``). A run that ends
early raises ``AgentStopped``, which carries the reason and the whole conversation.

``AgentLauncher`` builds and launches agents from task specs (a dict or a JSON file), and
can offer itself to an agent as a tool, so that agents launch sub-agents.

Run ``python agent.py --demo`` to watch a scripted run offline, ``python agent.py --help``
for the rest. Needs ``messages``, ``tools`` and ``llm_client``.

>>> def llm_call(conversation, tool_set):  # any function with this signature will do
...     if isinstance(conversation[-1], ToolResult):
...         return [Message("assistant", f"The answer is {conversation[-1].content}.")]
...     return [ToolCall("call_1", "calculator", {"expression": "12 * 7 + 5"})]
>>> conversation = agent_life_cycle("Use tools.", "What is 12 * 7 + 5?", llm_call, tool_set=DEMO_TOOLS)
>>> [type(m).__name__ for m in conversation]
['Message', 'Message', 'ToolCall', 'ToolResult', 'Message']
>>> conversation[-1].content
'The answer is 89.'
"""

import argparse
import ast
import concurrent.futures
import datetime
import json
import operator
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from llm_client import LlmClient, LlmRequest
from messages import AnyMessage, Message, ToolCall, ToolResult, Transcript, model_replies
from tools import Tool, ToolSet, as_tool_set, execute_tool_call, make_tool_set, tool

STOP_REASONS = {
    "step_limit": "the model was called max_steps times without giving an answer",
    "llm_error": "the model call failed (HTTP error, timeout, broken stream, or llm_call raised)",
    "truncated": "the reply was cut off at the length limit; its tool calls were not run",
    "deadline": "the run took longer than deadline_seconds",
    "repeated_tool_call": "the model kept repeating the same tool calls after being told",
    "token_budget": "the reported token usage reached token_budget",
    "content_filter": "the server's content filter withheld the reply",
}


class AgentStopped(Exception):
    """A run that ended without an answer: ``reason`` (a key of ``STOP_REASONS``), ``detail``,
    and ``conversation``, the whole conversation up to the stop. ``partial`` holds messages
    that arrived but were not added (a cut-off reply, the text of a broken stream)."""

    def __init__(self, reason: str, detail: str, conversation: list | None = None, partial: list | None = None) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail
        self.conversation = conversation if conversation is not None else []
        self.partial = partial or []


# --- the loop ------------------------------------------------------------------------------


def agent_life_cycle(
    system_message: str | Message | None,
    user_message: str | Message | None,
    llm_call: Callable[..., list],
    tool_call: Callable[[ToolCall, ToolSet], ToolResult] = execute_tool_call,
    tool_set: ToolSet | list[Tool] | None = None,
    *,
    history: list | None = None,
    max_steps: int = 20,
    on_message: Callable[[AnyMessage], None] | None = None,
    on_text: Callable[[str], None] | None = None,
    deadline_seconds: float | None = None,
    max_repeats: int = 3,
) -> list:
    """Run the agent until the model answers without a tool call; return the whole conversation.

    ``history`` is an earlier conversation to continue (multi-turn chat, resume): the system
    message is used only when there is no history, and tool calls left without a result are
    run first. ``on_message`` sees every message the moment it is appended; ``on_text``
    receives reply text as it streams (``llm_call`` must then accept ``on_text=``).
    Raises ``AgentStopped`` (with the conversation) when a guard or a failed call ends the run.
    """
    tool_set = as_tool_set(tool_set)  # a list of tools, as in the seed, is fine too
    conversation = list(history or [])
    started, steps, repeats = time.monotonic(), 0, RepeatCounter(max_repeats)

    def append(message: AnyMessage) -> None:
        conversation.append(message)
        if on_message is not None:
            on_message(message)

    def stop(reason: str, detail: str, partial: list | None = None) -> AgentStopped:
        return AgentStopped(reason, detail, conversation, partial)

    if system_message is not None and not conversation:
        append(as_message("system", system_message))
    if user_message is not None:  # a resumed run's pending tool calls are answered before the new turn
        for result in run_tool_calls(unanswered_tool_calls(conversation), tool_call, tool_set):
            append(result)
        append(as_message("user", user_message))
    while True:
        calls = unanswered_tool_calls(conversation)
        if calls and repeats.is_over(calls):
            for result in not_executed(calls, "it repeats the previous calls exactly, so the run was stopped"):
                append(result)  # the conversation stays valid, so it can be continued
            raise stop("repeated_tool_call", f"the same tool calls were asked for {repeats.count} times in a row")
        for result in run_tool_calls(calls, tool_call, tool_set):
            append(repeats.annotate(result))
        if steps >= max_steps:
            raise stop("step_limit", f"no answer after {steps} model calls (max_steps={max_steps})")
        if deadline_seconds is not None and time.monotonic() - started > deadline_seconds:
            raise stop("deadline", f"the run passed its deadline of {deadline_seconds:g} s")
        try:
            reply = llm_call(conversation, tool_set, on_text=on_text) if on_text else llm_call(conversation, tool_set)
        except AgentStopped as stopped:
            raise stop(stopped.reason, stopped.detail, stopped.partial) from stopped
        except Exception as error:  # whatever a plugged-in llm_call raises ends the run, keeping the conversation
            raise stop("llm_error", f"llm_call raised {type(error).__name__}: {error}") from error
        steps += 1
        for message in reply:
            append(message)
        if not any(isinstance(message, ToolCall) for message in reply):
            return conversation


def unanswered_tool_calls(conversation: list) -> list[ToolCall]:
    """Return the tool calls of the last assistant reply that have no result after them yet."""
    calls: list[ToolCall] = []
    answered = set()
    for message in reversed(conversation):
        if isinstance(message, ToolResult) and not calls:
            answered.add(message.tool_call_id)
        elif isinstance(message, ToolCall):
            calls.insert(0, message)
        else:
            break
    return [call for call in calls if call.tool_call_id not in answered]


def as_message(role: str, message: str | Message) -> Message:
    """Return ``message`` as a ``Message``: a str becomes one with ``role``."""
    return message if isinstance(message, Message) else Message(role, message)


def run_tool_calls(calls: list[ToolCall], tool_call: Callable, tool_set: ToolSet) -> list[ToolResult]:
    """Run the calls of one reply concurrently; return their results in the order of the calls.

    A ``tool_call`` function that raises (the default never does) gives an error result too.
    """

    def run(call: ToolCall) -> ToolResult:
        try:
            return tool_call(call, tool_set)
        except Exception as error:  # the tool boundary, for a plugged-in tool_call
            return ToolResult(call.tool_call_id, call.name, f"tool_call raised {type(error).__name__}: {error}", True)

    if len(calls) <= 1:
        return [run(call) for call in calls]
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(len(calls), 16)) as pool:
        return list(pool.map(run, calls))


def not_executed(calls: list[ToolCall], why: str) -> list[ToolResult]:
    """Return error results for tool calls that were never run, saying why, so the model knows."""
    return [ToolResult(call.tool_call_id, call.name, f"not executed: {why}", is_error=True) for call in calls]


class RepeatCounter:
    """Counts replies that repeat the previous reply's tool calls exactly (names and arguments).

    At ``limit`` repeats the tool results tell the model so; past it the run stops.
    """

    def __init__(self, limit: int) -> None:
        self.limit, self.count = limit, 0
        self.last: list[tuple] | None = None

    def is_over(self, calls: list[ToolCall]) -> bool:
        """Count this reply's calls; true when the repeats have gone past the limit."""
        key = [(c.name, json.dumps(c.arguments, sort_keys=True), c.raw_arguments) for c in calls]
        self.count = self.count + 1 if key == self.last else 1
        self.last = key
        return self.count > self.limit

    def annotate(self, result: ToolResult) -> ToolResult:
        """Add the warning to a result when this reply is exactly at the limit."""
        if self.count != self.limit:
            return result
        note = (
            f"\n[note: this exact tool call has now been made {self.count} times in a row and its "
            "result will not change; use the result, try something different, or answer. "
            "The run stops if the same call comes again.]"
        )
        return ToolResult(result.tool_call_id, result.name, result.content + note, result.is_error)


# --- the seed's llm_call, backed by a client ---------------------------------------------


class LlmCall:
    """``llm_call(conversation, tool_set, on_text=None)`` backed by an ``LlmClient`` or ``FakeLlm``.

    Turns a failed call into ``AgentStopped("llm_error")``, a cut-off reply into
    ``AgentStopped("truncated")`` (its half-written tool calls are never run), a filtered one
    into ``AgentStopped("content_filter")``, a refusal into the assistant's answer, an empty
    reply into an empty assistant message (so the turn stays in the history), and adds up
    the reported usage in ``usage``; with ``token_budget`` it refuses a call once the
    input and output tokens used reach the budget (``AgentStopped("token_budget")``).
    With ``max_tool_rounds``, once the model has made that many rounds of tool calls since
    the last user message it is asked with ``tool_choice: "none"``, so it must answer.
    """

    def __init__(
        self,
        client: Any,
        *,
        tool_choice: str | None = "auto",
        token_budget: int | None = None,
        max_tool_rounds: int | None = None,
    ):
        self.client, self.tool_choice, self.token_budget = client, tool_choice, token_budget
        self.max_tool_rounds = max_tool_rounds
        self.usage = {"input_tokens": 0, "output_tokens": 0}

    def choose_tool_choice(self, conversation: list, tool_set: ToolSet) -> str | None:
        """Return the ``tool_choice`` for this turn: none without tools, "none" past the rounds."""
        if not tool_set:
            return None
        if self.max_tool_rounds is not None and count_tool_rounds(conversation) >= self.max_tool_rounds:
            return "none"
        return self.tool_choice

    def __call__(self, conversation: list, tool_set: ToolSet, on_text: Callable[[str], None] | None = None) -> list:
        used = self.usage["input_tokens"] + self.usage["output_tokens"]
        if self.token_budget is not None and used >= self.token_budget:
            raise AgentStopped("token_budget", f"{used} tokens used, budget {self.token_budget}")
        request = LlmRequest(
            contents=list(conversation),
            tools=list(tool_set.values()),
            tool_choice=self.choose_tool_choice(conversation, tool_set),
        )
        response = self.client.generate(request, on_text=on_text)
        for key in self.usage:
            self.usage[key] += (response.usage_metadata or {}).get(key) or 0
        if response.error_message:
            raise AgentStopped("llm_error", response.error_message, partial=response.content)
        if response.is_truncated:
            raise AgentStopped("truncated", f"finish_reason {response.finish_reason!r}", partial=response.content)
        if response.finish_reason == "content_filter":
            raise AgentStopped("content_filter", "finish_reason 'content_filter'", partial=response.content)
        if not response.content and response.refusal:  # a refusal is the model's answer: show it as one
            return [Message("assistant", response.refusal)]
        return response.content or [Message("assistant", "")]  # an empty reply is still a turn: keep it


def count_tool_rounds(conversation: list) -> int:
    """Return how many replies since the last user message asked for tools."""
    rounds = 0
    for index, message in enumerate(conversation):
        if isinstance(message, Message) and message.role == "user":
            rounds = 0
        elif isinstance(message, ToolCall) and not (index and isinstance(conversation[index - 1], ToolCall)):
            rounds += 1
    return rounds


# --- the demo tools ------------------------------------------------------------------------

_ARITHMETIC: dict[type, Callable[..., Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}
_MAX_BITS = 4096  # bounds every intermediate integer, so no expression can hang the process


@tool
def calculator(expression: str) -> int | float:
    """Evaluate an arithmetic expression and return the number.

    Only numbers, + - * / // % **, unary minus and parentheses are allowed; anything else
    (names, calls, attributes) is refused. Walks the syntax tree itself: never eval.

    Args:
        expression: The arithmetic to evaluate, for example "12 * 7 + 5".
    """
    if len(expression) > 1000:
        raise ValueError("expression is longer than 1000 characters")
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as error:
        raise ValueError(f"not an arithmetic expression: {error.msg}") from None
    value = _evaluate(tree.body)
    if isinstance(value, complex):  # (-8) ** 0.5
        raise ValueError("the result is not a real number")
    return value


def _evaluate(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _ARITHMETIC:
        return _ARITHMETIC[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = _evaluate(node.left), _evaluate(node.right)
        both_int = isinstance(left, int) and isinstance(right, int)  # floats overflow quickly on their own
        if both_int and isinstance(node.op, ast.Pow) and abs(right) * max(abs(left), 2).bit_length() > _MAX_BITS:
            raise ValueError(f"{left} ** {right} is too large to compute")
        if both_int and isinstance(node.op, ast.Mult) and left.bit_length() + right.bit_length() > _MAX_BITS:
            raise ValueError("the product is too large to compute")
        return _ARITHMETIC[type(node.op)](left, right)
    raise ValueError(
        f"only arithmetic is allowed (numbers, + - * / // % ** and parentheses); found {type(node).__name__}"
    )


@tool
def current_time(timezone: str = "UTC") -> str:
    """Return the current date and time in a time zone, as ISO 8601 with the weekday.

    Args:
        timezone: An IANA time zone name such as "UTC", "Europe/Paris" or "America/New_York".
    """
    import zoneinfo  # here, not at the top: only this tool needs the time-zone database

    try:
        zone = zoneinfo.ZoneInfo(timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {timezone!r}; use an IANA name such as 'Europe/Paris'") from None
    now = datetime.datetime.now(zone)
    return f"{now.isoformat(timespec='seconds')} ({now.strftime('%A')})"


DEMO_TOOLS = make_tool_set([calculator, current_time])


# --- AgentLauncher: task specs in, agents out ----------------------------------------------

DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant. Use the tools when they help; answer briefly."

SPEC_FIELDS: dict[str, tuple[tuple[type, ...], Any]] = {
    # field: (allowed types, default); a default of ... means the field is required
    "task": ((str,), ...),
    "system_prompt": ((str,), DEFAULT_SYSTEM_PROMPT),
    "tools": ((list, type(None)), None),  # tool names; None means every tool the launcher has
    "model": ((str,), "gpt-4o-mini"),
    "base_url": ((str, type(None)), None),  # None: OPENAI_BASE_URL, else OpenAI
    "api_key_env": ((str,), "OPENAI_API_KEY"),  # the key's variable, never the key itself
    "api_key_header": ((str, type(None)), None),  # send the key in this header (Azure: "api-key"), not as Bearer
    "options": (
        (dict, type(None)),
        None,
    ),  # LlmClient keyword arguments: body fields (temperature, seed, ...), timeout, ...
    "max_steps": ((int,), 20),
    "deadline_seconds": ((int, float, type(None)), None),
    "token_budget": ((int, type(None)), None),
    "max_tool_rounds": ((int, type(None)), None),  # then the model must answer (tool_choice "none")
    "allow_subagents": ((bool,), False),
}


def load_spec(spec: dict | str | os.PathLike, tool_names: list[str]) -> dict:
    """Return a checked task spec with defaults filled in, from a dict or a JSON file's path.

    Raises ``ValueError`` naming the bad field and what is allowed.
    """
    if not isinstance(spec, dict):
        spec = read_spec_file(spec)
    if "api_key" in spec:
        raise ValueError("spec field 'api_key': keys do not belong in specs; name the variable in 'api_key_env'")
    unknown = sorted(set(spec) - set(SPEC_FIELDS))
    if unknown:
        raise ValueError(f"unknown spec field {unknown[0]!r}; allowed fields: {', '.join(SPEC_FIELDS)}")
    checked: dict[str, Any] = {}
    for name, (types, default) in SPEC_FIELDS.items():
        if name not in spec and default is ...:
            raise ValueError(f"spec field {name!r} is required")
        checked[name] = check_type(f"spec field {name!r}", spec.get(name, default), types)
    checked["options"] = check_options(checked["options"] or {})
    checked["tools"] = list(tool_names) if checked["tools"] is None else checked["tools"]
    for name in checked["tools"]:
        if name not in tool_names:
            raise ValueError(f"spec field 'tools': unknown tool {name!r}; allowed tools: {', '.join(tool_names)}")
    return checked


def read_spec_file(path: str | os.PathLike) -> dict:
    """Return the task spec in a JSON file; ``ValueError`` if it is not a JSON object."""
    with open(path, encoding="utf-8") as file:
        spec = json.load(file)
    if not isinstance(spec, dict):
        raise ValueError(f"{path}: a task spec must be a JSON object")
    return spec


def check_type(what: str, value: Any, types: tuple[type, ...]) -> Any:
    """Return ``value`` if it has one of ``types`` (a bool is no int here); else raise ``ValueError``."""
    if not isinstance(value, types) or isinstance(value, bool) and bool not in types:
        allowed = " or ".join("null" if t is type(None) else t.__name__ for t in types)
        raise ValueError(f"{what} must be {allowed}; got {type(value).__name__}")
    return value


OPTION_TYPES: dict[str, tuple[type, ...]] = {
    # the LlmClient settings a spec may give; any other option goes into the request body
    "timeout": (int, float),
    "max_retries": (int,),
    "headers": (dict,),
    "query": (dict,),
    "stream_usage": (bool,),
}


def check_options(options: dict) -> dict:
    """Return a copy of a spec's ``options`` once its client settings have the right types.

    Options may not set what other spec fields set, and no header may carry a key: a spec
    is a file that gets copied and written into transcripts.
    """
    for name in ("model", "base_url", "api_key", "api_key_header"):
        if name in options:
            raise ValueError(f"spec field 'options': {name!r} is set by its own spec field, not in options")
    if "sleep" in options:
        raise ValueError("spec field 'options': 'sleep' is a function; a spec cannot hold one")
    for name, types in OPTION_TYPES.items():
        if name in options:
            check_type(f"spec field 'options': {name!r}", options[name], types)
    for kind in ("headers", "query"):
        for name in options.get(kind, {}):
            if re.search("key|auth|token|secret|cookie", name, re.IGNORECASE):
                raise ValueError(
                    f"spec field 'options': {kind} {name!r} would put a secret in the spec; "
                    "name the key's variable in 'api_key_env' (and its header in 'api_key_header')"
                )
    return dict(options)


class AgentLauncher:
    """Builds agents from task specs and runs them: the model generates tokens, the agent
    generates messages, the launcher generates agents.

    ``tools`` are the tools a spec may name. ``client`` (an ``LlmClient`` or ``FakeLlm``)
    serves every launch when given; otherwise each spec's model settings build one. A spec
    with ``allow_subagents`` also gets a ``launch_agent`` tool that runs a sub-agent on a
    sub-task, nested at most ``max_depth`` deep. ``usage`` adds up the tokens of every launch.
    """

    def __init__(
        self,
        tools: ToolSet,
        *,
        client: Any = None,
        max_depth: int = 2,
        on_message: Callable[[AnyMessage], None] | None = None,
        on_text: Callable[[str], None] | None = None,
    ):
        if "launch_agent" in tools:
            raise ValueError("the tool name 'launch_agent' is the launcher's own; rename that tool")
        self.tools, self.client, self.max_depth = tools, client, max_depth
        self.on_message, self.on_text = on_message, on_text
        self.usage = {"input_tokens": 0, "output_tokens": 0}
        self.usage_lock = threading.Lock()

    def launch(
        self,
        spec: dict | str | os.PathLike,
        *,
        history: list | None = None,
        user_message: str | None = None,
        depth: int = 0,
    ) -> list:
        """Run the agent a spec describes and return its conversation (``AgentStopped`` if it stops).

        With ``history`` the run continues that conversation instead of starting on the
        spec's task: with ``user_message`` as a new turn, or else where it left off.
        """
        spec = load_spec(spec, list(self.tools))
        tool_set = {name: self.tools[name] for name in spec["tools"]}
        if spec["allow_subagents"] and depth < self.max_depth:
            tool_set["launch_agent"] = self.subagent_tool(spec, depth + 1)
        llm_call = LlmCall(
            self.client_for(spec), token_budget=spec["token_budget"], max_tool_rounds=spec["max_tool_rounds"]
        )
        try:
            return agent_life_cycle(
                spec["system_prompt"],
                user_message if history else spec["task"],
                llm_call,
                tool_set=tool_set,
                history=history,
                max_steps=spec["max_steps"],
                deadline_seconds=spec["deadline_seconds"],
                on_message=self.on_message if depth == 0 else None,
                on_text=self.on_text if depth == 0 else None,
            )
        finally:
            with self.usage_lock:  # sub-agents run in tool threads, side by side
                for key in self.usage:
                    self.usage[key] += llm_call.usage[key]

    def client_for(self, spec: dict) -> Any:
        """Return the launcher's client, or a new ``LlmClient`` from the spec's model settings."""
        if self.client is not None:
            return self.client
        api_key = os.environ.get(spec["api_key_env"]) or ""
        return LlmClient(
            spec["model"], spec["base_url"], api_key, api_key_header=spec["api_key_header"], **spec["options"]
        )

    def subagent_tool(self, parent: dict, depth: int) -> Tool:
        """Return the ``launch_agent`` tool: a sub-agent with the parent's settings on a new task."""

        def launch_agent(task: str, tools: list[str] | None = None) -> str:
            """Launch a sub-agent on a self-contained sub-task and return its final answer.

            Args:
                task: The sub-task, with everything the sub-agent needs to know.
                tools: Names of the tools the sub-agent may use; by default, the same as yours.
            """
            child = dict(parent, task=task, tools=parent["tools"] if tools is None else tools)
            return self.launch(child, depth=depth)[-1].content

        return tool(launch_agent)


# --- the command line ----------------------------------------------------------------------

DEMO_TASK = "What is 12 * 7 + 5, what is that doubled, and what time is it in UTC?"


def demo_model(request: LlmRequest) -> list:
    """The scripted model of ``--demo``: two tool calls at once, then one more, then the answer."""
    results = [m for m in request.contents if isinstance(m, ToolResult)]
    if not results:
        return [
            Message("assistant", "I'll work out the sum and check the clock at the same time."),
            ToolCall("call_sum", "calculator", {"expression": "12 * 7 + 5"}),
            ToolCall("call_clock", "current_time", {"timezone": "UTC"}),
        ]
    if len(results) == 2:
        return [ToolCall("call_double", "calculator", {"expression": f"{results[0].content} * 2"})]
    return [
        Message(
            "assistant",
            f"12 * 7 + 5 = {results[0].content}; doubled, {results[2].content}. "
            f"The time in UTC is {results[1].content}.",
        )
    ]


class Printer:
    """Prints a run as it happens: tool calls, results, the answer (streamed when asked)."""

    def __init__(self, out: Any = None) -> None:
        self.out, self.streamed = out if out is not None else sys.stdout, False

    def on_text(self, piece: str) -> None:
        """Show a piece of streamed answer text as it arrives."""
        self.write(piece if self.streamed else "assistant: " + piece)
        self.streamed = True

    def on_message(self, message: AnyMessage) -> None:
        """Show one appended message as a line (an answer already streamed only ends its line)."""
        if isinstance(message, ToolCall):
            shown = message.raw_arguments if message.raw_arguments is not None else json.dumps(message.arguments)
            line = f"-> {message.name}({shown})"
        elif isinstance(message, ToolResult):
            line = f"<- {message.name}{' [error]' if message.is_error else ''}: {message.content}"
        elif self.streamed and message.role == "assistant":
            line = ""  # its text is already on the screen
        elif message.role == "assistant" and not message.content and message.reasoning_content is not None:
            return  # a reply's reasoning before its tool calls: nothing to show
        else:
            line = f"{message.role}: {message.content}"
        self.streamed = False
        self.write(line + "\n")

    def write(self, text: str) -> None:
        """Write and flush; what the terminal cannot show (a lone surrogate from a server) is escaped."""
        encoding = getattr(self.out, "encoding", None) or "utf-8"
        self.out.write(text.encode(encoding, "backslashreplace").decode(encoding))
        self.out.flush()


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    """Read the command line; a usage error exits with status 2."""
    parser = argparse.ArgumentParser(prog="agent.py", description="Run an agent on a task.")
    parser.add_argument("task", nargs="?", help="the task (with --resume: a new user message)")
    parser.add_argument("--demo", action="store_true", help="run a scripted multi-step demo offline")
    parser.add_argument("--spec", help="launch from a task spec (JSON file)")
    parser.add_argument("--model", help="model name (default: $OPENAI_MODEL, else gpt-4o-mini)")
    parser.add_argument("--base-url", help="server base URL (default: $OPENAI_BASE_URL, else OpenAI)")
    parser.add_argument("--max-steps", type=int, help="most model calls in one run (default 20)")
    parser.add_argument(
        "--max-tool-rounds", type=int, help="after this many rounds of tool calls the model must answer without tools"
    )
    parser.add_argument("--no-stream", action="store_true", help="print the answer when complete, not as it streams")
    parser.add_argument("--transcript", help="write every message to this JSON Lines file as it happens")
    parser.add_argument("--resume", help="continue the run saved in this transcript (and keep writing to it)")
    parser.add_argument(
        "--skip-pending",
        action="store_true",
        help="with --resume: record tool calls left without a result as not executed, instead of running them",
    )
    arguments = parser.parse_args(argv)
    if not (arguments.task or arguments.demo or arguments.spec or arguments.resume):
        parser.error("give a task, --spec FILE, --resume FILE or --demo")
    if arguments.resume and (arguments.transcript or arguments.spec or arguments.demo):
        parser.error("--resume continues the run's own transcript and settings; drop --transcript, --spec and --demo")
    if arguments.skip_pending and not arguments.resume:
        parser.error("--skip-pending goes with --resume")
    return arguments


def spec_from_arguments(arguments: argparse.Namespace, saved: dict | None = None) -> dict:
    """Build the task spec the command line describes: a saved or file spec, then flags on top."""
    spec: dict[str, Any] = dict(saved or {})
    if arguments.spec:
        spec = read_spec_file(arguments.spec)
    elif not arguments.demo and saved is None:
        spec["model"] = os.environ.get("OPENAI_MODEL", SPEC_FIELDS["model"][1])
    flags = {
        "model": arguments.model,
        "base_url": arguments.base_url,
        "max_steps": arguments.max_steps,
        "max_tool_rounds": arguments.max_tool_rounds,
    }
    if saved is None:
        flags["task"] = arguments.task
    spec.update({key: value for key, value in flags.items() if value is not None})
    if arguments.demo:
        spec.setdefault("task", DEMO_TASK)
    return spec


STOPPED_BEFORE_RUNNING = "the run stopped before this tool call ran; call the tool again if you still need it"
NOT_EXECUTED = f"not executed: {STOPPED_BEFORE_RUNNING}"


def skip_pending(conversation: list) -> list[ToolResult]:
    """Return 'not executed' error results for the tool calls left without a result."""
    return not_executed(unanswered_tool_calls(conversation), STOPPED_BEFORE_RUNNING)


def open_run(arguments: argparse.Namespace) -> tuple[dict, list | None, Transcript | None, bool]:
    """Return the run's spec, history (when resuming), transcript and whether it is the demo.

    Raises ``ValueError`` for a transcript that does not fit: a missing one to resume, an
    existing one for a new run (it would mix two runs), or a finished run with no new message.
    """
    if not arguments.resume:
        spec = load_spec(spec_from_arguments(arguments), list(DEMO_TOOLS))
        if arguments.transcript and os.path.exists(arguments.transcript) and os.path.getsize(arguments.transcript):
            raise ValueError(
                f"{arguments.transcript} already holds a run; continue it with --resume, or pick a new file"
            )
        settings = {"spec": spec, "demo": arguments.demo}
        return spec, None, Transcript(arguments.transcript, settings) if arguments.transcript else None, arguments.demo
    if not os.path.exists(arguments.resume):
        raise ValueError(f"no transcript at {arguments.resume}")
    transcript = Transcript(arguments.resume)
    history = transcript.conversation
    if history and isinstance(history[-1], Message) and history[-1].role == "assistant" and not arguments.task:
        raise ValueError(f"the run in {arguments.resume} ends with the model's answer; give a message to continue it")
    spec = load_spec(spec_from_arguments(arguments, transcript.settings.get("spec", {})), list(DEMO_TOOLS))
    return spec, history, transcript, transcript.settings.get("demo", False)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit status (0 answered, 1 stopped early, 2 usage)."""
    arguments = parse_arguments(argv)
    printer = Printer()
    try:
        spec, history, transcript, demo = open_run(arguments)
    except (ValueError, OSError) as error:
        print(f"agent.py: error: {error}", file=sys.stderr)
        return 2

    def on_message(message: AnyMessage) -> None:
        if transcript is not None:
            transcript.write(message)
        printer.on_message(message)

    if arguments.skip_pending and history is not None:
        for result in skip_pending(history):
            history.append(result)
            on_message(result)
    client = None
    if demo:
        from fake_llm import FakeLlm  # only the demo needs the fake model

        client = FakeLlm(demo_model)
    stream = sys.stdout.isatty() and not arguments.no_stream
    on_text = printer.on_text if stream else None
    launcher = AgentLauncher(DEMO_TOOLS, client=client, on_message=on_message, on_text=on_text)
    try:
        conversation = launcher.launch(spec, history=history, user_message=arguments.task if history else None)
    except ValueError as error:  # a client setting LlmClient refuses (a key with a newline in it, ...)
        print(f"agent.py: error: {error}", file=sys.stderr)
        return 2
    except AgentStopped as stopped:
        print(f"stopped ({stopped.reason}): {stopped.detail}", file=sys.stderr)
        print(summary(stopped.conversation, launcher.usage), file=sys.stderr)
        return 1
    print(summary(conversation, launcher.usage))
    return 0


def summary(conversation: list, usage: dict) -> str:
    """One line about a run: model replies, tool calls, and tokens when the server reported them."""
    replies = len(model_replies(conversation))
    calls = sum(1 for m in conversation if isinstance(m, ToolCall))
    tokens = f", {usage['input_tokens']} input + {usage['output_tokens']} output tokens" if any(usage.values()) else ""
    return f"[{replies} model replies, {calls} tool calls{tokens}]"


if __name__ == "__main__":
    sys.exit(main())
