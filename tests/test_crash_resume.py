"""Nothing lost: a CLI run killed at any step leaves a transcript that resumes to the same run.

The command line runs in a subprocess against a loopback chat-completions server scripted
with a three-step run: two calculator calls at once, then one more, then the answer. To
kill the run at a known point without sleeping, the server holds request N, tells the test
it has arrived, and the test looks at the transcript and sends SIGKILL; the held handler is
released when the server closes. The resumed run (``--resume``) talks to a new server that
continues the script, so every message must come out exactly once.
"""

import json
import subprocess
import threading
import warnings
from pathlib import Path

import pytest

from agent import DEFAULT_SYSTEM_PROMPT, DEMO_TOOLS, NOT_EXECUTED, load_spec
from loopback import LoopbackServer, Reply, agent_cli, chat_completion
from messages import Message, ToolCall, ToolResult, load_transcript

WAIT_SECONDS = 60.0  # only a broken test waits this long

TASK = "Work out 12 * 7 + 5 and 2 ** 10, then double the first."
SCRIPT = [
    chat_completion(
        tool_calls=[
            ("call_1", "calculator", {"expression": "12 * 7 + 5"}),
            ("call_2", "calculator", {"expression": "2 ** 10"}),
        ]
    ),
    chat_completion(tool_calls=[("call_3", "calculator", {"expression": "89 * 2"})]),
    chat_completion("89, 1024, and 89 doubled is 178."),
]
EXPECTED = [
    Message("system", DEFAULT_SYSTEM_PROMPT),
    Message("user", TASK),
    ToolCall("call_1", "calculator", {"expression": "12 * 7 + 5"}),
    ToolCall("call_2", "calculator", {"expression": "2 ** 10"}),
    ToolResult("call_1", "calculator", "89"),
    ToolResult("call_2", "calculator", "1024"),
    ToolCall("call_3", "calculator", {"expression": "89 * 2"}),
    ToolResult("call_3", "calculator", "178"),
    Message("assistant", "89, 1024, and 89 doubled is 178."),
]
SENT_BEFORE_REQUEST = {1: 2, 2: 6, 3: 8}  # how many messages the transcript holds when request N goes out


def settings_for(base_url: str) -> dict:
    """The transcript header's settings for a run of TASK on ``base_url``: the whole checked spec."""
    spec = load_spec({"task": TASK, "model": "m", "base_url": base_url}, list(DEMO_TOOLS))
    return {"spec": spec, "demo": False}


class KilledRun:
    """A CLI run killed with SIGKILL while the server held request ``number``.

    ``snapshot`` is the transcript's bytes read while the process was still alive and waiting;
    ``held`` is the request it was waiting on.
    """

    def __init__(self, tmp_path: Path, number: int) -> None:
        self.path = tmp_path / "run.jsonl"
        arrived = threading.Event()
        held = Reply(body=SCRIPT[number - 1], hold=threading.Event(), arrived=arrived)
        with LoopbackServer([Reply(body=body) for body in SCRIPT[: number - 1]] + [held]) as server:
            arguments = [
                "--base-url",
                server.base_url,
                "--model",
                "m",
                "--no-stream",
                "--transcript",
                str(self.path),
                TASK,
            ]
            process = subprocess.Popen(**agent_cli(*arguments), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                assert arrived.wait(WAIT_SECONDS), f"the run never sent request {number}"
                self.snapshot = self.path.read_bytes()
            finally:
                process.kill()  # SIGKILL: the process gets no chance to tidy up
                process.wait(WAIT_SECONDS)
        self.base_url, self.held = server.base_url, server.requests[number - 1]


def resume(path: Path, script: list, *flags: str) -> tuple[subprocess.CompletedProcess, LoopbackServer]:
    """Resume the transcript at ``path`` against a server answering with ``script``; return the run and server."""
    with LoopbackServer([Reply(body=body) for body in script]) as server:
        done = subprocess.run(
            **agent_cli("--resume", str(path), "--base-url", server.base_url, *flags),
            capture_output=True,
            text=True,
            timeout=WAIT_SECONDS,
        )
    return done, server


def strict_load(path: Path) -> tuple[dict, list]:
    """``load_transcript``, failing on any warning: a file with a torn line would warn."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return load_transcript(path)


def as_dicts(conversation: list) -> list[dict]:
    return [message.to_dict() for message in conversation]


def cut_after_line(path: Path, count: int, torn: bytes = b"") -> None:
    """Keep the first ``count`` lines of a file, then append ``torn`` (a line with no newline)."""
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:count]) + torn)


# --- killed while waiting for the model ------------------------------------------------------


@pytest.mark.parametrize("number", [1, 2, 3])
def test_while_a_run_waits_for_the_model_its_transcript_already_holds_every_message_so_far(tmp_path, number):
    run = KilledRun(tmp_path, number)
    lines = run.snapshot.split(b"\n")
    assert lines[-1] == b""  # every write ended in a newline: nothing is half written
    assert [json.loads(line) for line in lines[:-1]] == [
        {"type": "header", "format": "plainagent-transcript/1", "settings": settings_for(run.base_url)},
        *as_dicts(EXPECTED[: SENT_BEFORE_REQUEST[number]]),
    ]


@pytest.mark.parametrize("number", [1, 2, 3])
def test_a_run_killed_while_waiting_for_the_model_leaves_valid_lines_and_its_settings(tmp_path, number):
    run = KilledRun(tmp_path, number)
    settings, conversation = strict_load(run.path)
    assert (settings, conversation) == (settings_for(run.base_url), EXPECTED[: SENT_BEFORE_REQUEST[number]])


@pytest.mark.parametrize("number", [1, 2, 3])
def test_a_killed_run_resumes_to_the_whole_conversation_with_every_message_once(tmp_path, number):
    run = KilledRun(tmp_path, number)
    done, server = resume(run.path, SCRIPT[number - 1 :])
    assert (done.returncode, done.stderr, len(server.requests)) == (0, "", 4 - number)
    assert as_dicts(strict_load(run.path)[1]) == as_dicts(EXPECTED)


@pytest.mark.parametrize("number", [1, 2, 3])
def test_a_resumed_run_asks_the_model_exactly_what_the_killed_run_was_asking(tmp_path, number):
    run = KilledRun(tmp_path, number)
    _, server = resume(run.path, SCRIPT[number - 1 :])
    assert server.requests[0].body == run.held.body


# --- killed between the tool calls and their results ------------------------------------------

HEADER_AND_CALLS = 5  # header, system, user, call_1, call_2


def test_tool_calls_left_without_results_are_run_when_the_run_resumes(tmp_path):
    run = KilledRun(tmp_path, 2)
    cut_after_line(run.path, HEADER_AND_CALLS)
    done, server = resume(run.path, SCRIPT[1:])
    assert (done.returncode, len(server.requests)) == (0, 2)
    assert as_dicts(strict_load(run.path)[1]) == as_dicts(EXPECTED)


def test_with_skip_pending_tool_calls_left_without_results_are_recorded_as_not_executed(tmp_path):
    run = KilledRun(tmp_path, 2)
    cut_after_line(run.path, HEADER_AND_CALLS)
    done, server = resume(run.path, SCRIPT[1:], "--skip-pending")
    not_executed = [
        ToolResult("call_1", "calculator", NOT_EXECUTED, is_error=True),
        ToolResult("call_2", "calculator", NOT_EXECUTED, is_error=True),
    ]
    assert (done.returncode, len(server.requests)) == (0, 2)
    assert as_dicts(strict_load(run.path)[1]) == as_dicts(EXPECTED[:4] + not_executed + EXPECTED[6:])


def test_a_torn_last_line_is_ignored_with_a_warning_and_the_resume_completes(tmp_path):
    run = KilledRun(tmp_path, 2)
    cut_after_line(run.path, 7, torn=b'{"type": "tool_call", "tool_call_id": "call_3", "na')
    done, _ = resume(run.path, SCRIPT[1:])
    assert (done.returncode, "ignoring torn last line 8 (51 bytes)" in done.stderr) == (0, True)
    assert as_dicts(strict_load(run.path)[1]) == as_dicts(EXPECTED)
