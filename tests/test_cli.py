"""The command line (``python agent.py``) and the demo's tools, calculator and current_time."""

import datetime
import json
import os
import re
import socket
import subprocess
import sys
import types
from pathlib import Path

import pytest

import agent
from agent import DEMO_TOOLS, calculator, current_time
from messages import ToolCall, ToolResult
from tools import execute_tool_call

PROJECT = Path(__file__).resolve().parent.parent


def run_cli(*arguments):
    """Run ``python agent.py`` with ``arguments`` and no OPENAI_* variables; return the process."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI_")}
    return subprocess.run(
        [sys.executable, "agent.py", *arguments], cwd=PROJECT, env=env, capture_output=True, text=True, timeout=120
    )


def closed_port():
    """Return a 127.0.0.1 port that nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def write_spec(tmp_path, spec):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    return str(path)


# --- the command line ------------------------------------------------------------------------


def test_the_demo_shows_two_tool_calls_at_once_then_their_results_and_a_summary():
    done = run_cli("--demo")
    shown = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00 \(\w+\)", "<now>", done.stdout)
    assert (done.returncode, shown, done.stderr) == (
        0,
        "system: You are a helpful assistant. Use the tools when they help; answer briefly.\n"
        "user: What is 12 * 7 + 5, what is that doubled, and what time is it in UTC?\n"
        "assistant: I'll work out the sum and check the clock at the same time.\n"
        '-> calculator({"expression": "12 * 7 + 5"})\n'
        '-> current_time({"timezone": "UTC"})\n'
        "<- calculator: 89\n"
        "<- current_time: <now>\n"
        '-> calculator({"expression": "89 * 2"})\n'
        "<- calculator: 178\n"
        "assistant: 12 * 7 + 5 = 89; doubled, 178. The time in UTC is <now>.\n"
        "[3 model replies, 3 tool calls]\n",
        "",
    )


class Terminal:
    """A stand-in stdout that says it is a terminal and keeps every write apart."""

    def __init__(self):
        self.writes = []

    def isatty(self):
        return True

    def write(self, text):
        self.writes.append(text)

    def flush(self):
        pass


def test_in_a_terminal_the_answer_streams_piece_by_piece(monkeypatch):
    terminal = Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    assert agent.main(["--demo"]) == 0
    first = terminal.writes.index("assistant: I'll ")
    assert terminal.writes[first + 1 : first + 3] == ["work ", "out "]
    assert "".join(terminal.writes).count("assistant: ") == 2


def test_no_stream_prints_each_answer_in_one_piece_even_in_a_terminal(monkeypatch):
    terminal = Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    assert agent.main(["--demo", "--no-stream"]) == 0
    assert "assistant: I'll work out the sum and check the clock at the same time.\n" in terminal.writes


def test_text_the_terminal_cannot_encode_is_printed_escaped():
    class AsciiTerminal(Terminal):
        encoding = "ascii"

    terminal = AsciiTerminal()
    agent.Printer(terminal).on_message(agent.Message("assistant", "caf\u00e9 \ud83d"))
    assert terminal.writes == ["assistant: caf\\xe9 \\ud83d\n"]


def test_no_task_is_a_usage_error():
    done = run_cli()
    assert (done.returncode, done.stdout, done.stderr.splitlines()[-1]) == (
        2,
        "",
        "agent.py: error: give a task, --spec FILE, --resume FILE or --demo",
    )


def test_a_bad_spec_file_is_a_usage_error_naming_the_field(tmp_path):
    done = run_cli("--spec", write_spec(tmp_path, {"task": "Add.", "max_steps": "3"}))
    assert (done.returncode, done.stdout, done.stderr) == (
        2,
        "",
        "agent.py: error: spec field 'max_steps' must be int; got str\n",
    )


def test_a_run_that_stops_exits_1_and_says_why(tmp_path):
    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    spec = {"task": "Add.", "base_url": base_url, "max_steps": 1, "options": {"max_retries": 0}}  # no backoff waits
    done = run_cli("--spec", write_spec(tmp_path, spec))
    assert (done.returncode, done.stderr.startswith("stopped (llm_error): "), done.stderr.splitlines()[-1]) == (
        1,
        True,
        "[0 model replies, 0 tool calls]",
    )


# --- calculator ------------------------------------------------------------------------------


def calculate(expression):
    """Run the calculator as the agent would; return the ToolResult."""
    return execute_tool_call(ToolCall("call_1", "calculator", {"expression": expression}), DEMO_TOOLS)


@pytest.mark.parametrize(
    "expression, value",
    [
        ("12 * 7 + 5", "89"),
        ("(1 + 2) * -3", "-9"),
        ("7 / 2", "3.5"),
        ("7 // 2", "3"),
        ("7 % 4", "3"),
        ("2 ** 10", "1024"),
        ("2.5 ** 2", "6.25"),
    ],
)
def test_the_calculator_does_arithmetic(expression, value):
    assert calculate(expression) == ToolResult("call_1", "calculator", value)


def test_division_by_zero_is_an_error_result():
    assert calculate("1 / 0") == ToolResult(
        "call_1", "calculator", "tool 'calculator' raised ZeroDivisionError: division by zero", is_error=True
    )


@pytest.mark.parametrize(
    "expression, found",
    [
        ("__import__('os').system('x')", "Call"),
        ("x + 1", "Name"),
        ("(1).real", "Attribute"),
        ("(lambda: 1)()", "Call"),
        ("lambda: 1", "Lambda"),
        ("'a' * 3", "Constant"),
        ("1 << 3", "BinOp"),
    ],
)
def test_the_calculator_refuses_anything_but_arithmetic(expression, found):
    assert calculate(expression) == ToolResult(
        "call_1",
        "calculator",
        "tool 'calculator' raised ValueError: only arithmetic is allowed "
        f"(numbers, + - * / // % ** and parentheses); found {found}",
        is_error=True,
    )


@pytest.mark.parametrize(
    "expression, message",
    [
        ("9**9**9", "9 ** 387420489 is too large to compute"),
        ("2**100000", "2 ** 100000 is too large to compute"),
        ("2**2000 * 2**2000 * 2**2000", "the product is too large to compute"),
    ],
)
def test_the_calculator_refuses_numbers_too_large_to_compute(expression, message):
    with pytest.raises(ValueError) as raised:
        calculator(expression)
    assert str(raised.value) == message


def test_the_calculator_refuses_a_complex_result():
    result = execute_tool_call(ToolCall("c", "calculator", {"expression": "(-8) ** 0.5"}), DEMO_TOOLS)
    assert (result.is_error, result.content) == (
        True,
        "tool 'calculator' raised ValueError: the result is not a real number",
    )


def test_the_calculator_refuses_text_that_is_not_an_expression():
    with pytest.raises(ValueError, match="^not an arithmetic expression: "):
        calculator("2 +")


def test_the_calculator_refuses_very_long_expressions():
    with pytest.raises(ValueError) as raised:
        calculator("1+" * 600 + "1")
    assert str(raised.value) == "expression is longer than 1000 characters"


# --- current_time ------------------------------------------------------------------------------


class FrozenDatetime(datetime.datetime):
    """A datetime whose ``now`` is always 2024-01-02 03:04:05 UTC."""

    @classmethod
    def now(cls, tz=None):
        return datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc).astimezone(tz)


@pytest.mark.parametrize(
    "zone, shown",
    [("UTC", "2024-01-02T03:04:05+00:00 (Tuesday)"), ("Asia/Tokyo", "2024-01-02T12:04:05+09:00 (Tuesday)")],
)
def test_current_time_gives_the_time_in_the_zone_with_the_weekday(monkeypatch, zone, shown):
    monkeypatch.setattr(agent, "datetime", types.SimpleNamespace(datetime=FrozenDatetime))
    assert current_time(zone) == shown


@pytest.mark.parametrize("zone", ["Mars/Olympus_Mons", "../etc/passwd", ""])
def test_current_time_refuses_an_unknown_zone(zone):
    with pytest.raises(ValueError) as raised:
        current_time(zone)
    assert str(raised.value) == f"unknown time zone {zone!r}; use an IANA name such as 'Europe/Paris'"


def test_a_new_run_refuses_a_transcript_that_already_holds_a_run(tmp_path):
    path = tmp_path / "run.jsonl"
    assert run_cli("--demo", "--transcript", str(path)).returncode == 0
    before = path.read_bytes()
    done = run_cli("--demo", "--transcript", str(path))
    assert (done.returncode, done.stderr.strip(), path.read_bytes()) == (
        2,
        f"agent.py: error: {path} already holds a run; continue it with --resume, or pick a new file",
        before,
    )


def test_resuming_a_missing_transcript_is_an_error_and_creates_no_file(tmp_path):
    path = tmp_path / "typo.jsonl"
    done = run_cli("--resume", str(path))
    assert (done.returncode, done.stderr.strip(), path.exists()) == (
        2,
        f"agent.py: error: no transcript at {path}",
        False,
    )


def test_resuming_a_finished_run_without_a_message_asks_for_one(tmp_path):
    path = tmp_path / "run.jsonl"
    assert run_cli("--demo", "--transcript", str(path)).returncode == 0
    done = run_cli("--resume", str(path))
    assert (done.returncode, done.stderr.strip()) == (
        2,
        f"agent.py: error: the run in {path} ends with the model's answer; give a message to continue it",
    )


def test_a_finished_demo_run_continues_with_a_new_message(tmp_path):
    path = tmp_path / "run.jsonl"
    assert run_cli("--demo", "--transcript", str(path)).returncode == 0
    done = run_cli("--resume", str(path), "Thanks!")
    assert done.returncode == 0
    assert "user: Thanks!\n" in done.stdout


def test_resuming_a_file_that_is_not_a_transcript_leaves_it_untouched(tmp_path):
    path = tmp_path / "task.json"
    path.write_bytes(b'{"task": "What is 2+2?", "model": "m"}')
    done = run_cli("--resume", str(path))
    assert (done.returncode, done.stderr.strip(), path.read_bytes()) == (
        2,
        f"agent.py: error: {path} is not a plainagent transcript: it has no header line",
        b'{"task": "What is 2+2?", "model": "m"}',
    )


def test_a_reasoning_only_assistant_message_prints_no_empty_line():
    terminal = Terminal()
    agent.Printer(terminal).on_message(agent.Message("assistant", "", reasoning_content="Thinking."))
    assert terminal.writes == []
