"""The README's Python examples run, in order, as written: a README claim is a tested claim.

Examples that talk to "OpenAI" reach a loopback server instead (``OPENAI_BASE_URL``), and the
replay example finds the ``run.jsonl`` it describes, written here by a scripted run.
"""

import pathlib
import re

from agent import DEMO_TOOLS, LlmCall, agent_life_cycle
from fake_llm import FakeLlm
from loopback import LoopbackServer, Reply, chat_completion
from messages import Message, ToolCall, Transcript

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def python_examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)


def write_recorded_run(path: pathlib.Path) -> None:
    """Write the transcript of a calculator run, as ``agent.py --transcript`` would."""
    transcript = Transcript(path, {"spec": {"task": "What is 12 * 7 + 5?"}})
    fake = FakeLlm([ToolCall("call_1", "calculator", {"expression": "12 * 7 + 5"}), "It is 89."])
    agent_life_cycle(
        Message("system", "Use tools."),
        "What is 12 * 7 + 5?",
        LlmCall(fake),
        tool_set=DEMO_TOOLS,
        on_message=transcript.write,
    )


def test_every_python_example_in_the_readme_runs(tmp_path, monkeypatch, capsys):
    examples = python_examples()
    assert len(examples) >= 6
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    write_recorded_run(tmp_path / "run.jsonl")
    with LoopbackServer([Reply(body=chat_completion("Hello.")) for _ in range(10)]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        namespace: dict = {}
        for number, example in enumerate(examples, start=1):
            exec(compile(example, f"README.md python example {number}", "exec"), namespace)
    assert [request.path for request in server.requests] == ["/v1/chat/completions"] * 3
    assert "Hello." in capsys.readouterr().out
