"""Transcripts: a run saved as JSON Lines, read back, and continued after a crash."""

import json

import pytest

from messages import Message, ToolCall, ToolResult, Transcript, load_transcript

HEADER = {"type": "header", "format": "plainagent-transcript/1", "settings": {"model": "m", "max_steps": 5}}
HEADER_LINE = json.dumps(HEADER) + "\n"
USER_LINE = '{"type": "message", "role": "user", "content": "Hi"}\n'
REPLY_LINE = '{"type": "message", "role": "assistant", "content": "Hello"}\n'


def read_records(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_new_transcript_starts_with_a_header_holding_the_settings(tmp_path):
    path = tmp_path / "run.jsonl"
    Transcript(path, {"model": "m", "max_steps": 5})
    assert read_records(path) == [HEADER]


def test_each_message_written_is_one_line(tmp_path):
    path = tmp_path / "run.jsonl"
    transcript = Transcript(path, {"model": "m", "max_steps": 5})
    transcript.write(Message("user", "Hi"))
    transcript.write(ToolCall("call_1", "add", {"a": 2}))
    transcript.write(ToolResult("call_1", "add", "2"))
    assert read_records(path) == [
        HEADER,
        {"type": "message", "role": "user", "content": "Hi"},
        {"type": "tool_call", "tool_call_id": "call_1", "name": "add", "arguments": {"a": 2}},
        {"type": "tool_result", "tool_call_id": "call_1", "name": "add", "content": "2", "is_error": False},
    ]


def test_a_written_transcript_loads_back_as_settings_and_conversation(tmp_path):
    path = tmp_path / "run.jsonl"
    transcript = Transcript(path, {"model": "m", "max_steps": 5})
    transcript.write(Message("user", "Hi"))
    transcript.write(ToolCall("call_1", "add", {}, raw_arguments="{oops"))
    assert load_transcript(path) == (
        {"model": "m", "max_steps": 5},
        [Message("user", "Hi"), ToolCall("call_1", "add", {}, raw_arguments="{oops")],
    )


def test_a_torn_last_line_is_ignored_with_a_warning(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_text(HEADER_LINE + USER_LINE + '{"type": "message", "ro', encoding="utf-8")
    with pytest.warns(UserWarning, match="ignoring torn last line 3 "):
        settings, conversation = load_transcript(path)
    assert (settings, conversation) == ({"model": "m", "max_steps": 5}, [Message("user", "Hi")])


def test_a_corrupt_middle_line_raises_naming_the_line(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_text(HEADER_LINE + "{not json\n" + USER_LINE, encoding="utf-8")
    with pytest.raises(ValueError, match="line 2 is not a valid transcript record"):
        load_transcript(path)


def test_a_middle_line_of_an_unknown_type_raises_naming_the_line(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_text(HEADER_LINE + USER_LINE + '{"type": "image"}\n' + REPLY_LINE, encoding="utf-8")
    with pytest.raises(ValueError, match="line 3 is not a valid transcript record: message type must be one of"):
        load_transcript(path)


def test_a_file_without_a_header_raises_naming_line_1(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_text(USER_LINE, encoding="utf-8")
    with pytest.raises(
        ValueError, match="line 1 is not a valid transcript record: the first line must be the transcript header"
    ):
        load_transcript(path)


def test_reopening_a_transcript_reads_its_settings_and_conversation(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_text(HEADER_LINE + USER_LINE + REPLY_LINE, encoding="utf-8")
    transcript = Transcript(path, {"model": "other"})
    assert (transcript.settings, transcript.conversation) == (
        {"model": "m", "max_steps": 5},
        [Message("user", "Hi"), Message("assistant", "Hello")],
    )


def test_reopening_a_transcript_cuts_the_torn_tail_and_appends(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_text(HEADER_LINE + USER_LINE + '{"type": "mess', encoding="utf-8")
    with pytest.warns(UserWarning, match="ignoring torn last line 3 "):
        transcript = Transcript(path)
    transcript.write(Message("assistant", "Hello"))
    assert path.read_text(encoding="utf-8") == HEADER_LINE + USER_LINE + REPLY_LINE


def test_reopening_a_transcript_whose_header_was_torn_starts_it_afresh(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_text('{"type": "header", "for', encoding="utf-8")
    with pytest.warns(UserWarning, match="ignoring torn last line 1 "):
        transcript = Transcript(path, {"model": "m", "max_steps": 5})
    transcript.write(Message("user", "Hi"))
    assert path.read_text(encoding="utf-8") == HEADER_LINE + USER_LINE


def test_a_lone_surrogate_from_a_server_is_written_escaped_and_loads_back_unchanged(tmp_path):
    path = tmp_path / "run.jsonl"
    Transcript(path, {}).write(Message("assistant", "broken \ud83d emoji"))
    assert (
        path.read_bytes().splitlines()[1]
        == b'{"type": "message", "role": "assistant", "content": "broken \\ud83d emoji"}'
    )
    assert load_transcript(path)[1] == [Message("assistant", "broken \ud83d emoji")]


def test_a_file_that_is_not_a_transcript_is_refused_and_left_as_it_is(tmp_path):
    path = tmp_path / "task.json"
    path.write_bytes(b'{"task": "What is 2+2?", "model": "m"}')  # no newline, as json.dump writes it
    with pytest.raises(ValueError, match="is not a plainagent transcript: it has no header line"):
        Transcript(path)
    assert path.read_bytes() == b'{"task": "What is 2+2?", "model": "m"}'
