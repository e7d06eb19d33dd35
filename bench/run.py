"""Benchmarks: what plainagent costs against the floor the standard library sets.

    python bench/run.py           # the full run, about half a minute
    python bench/run.py --quick   # a few seconds: proves the benchmark still works; rough numbers

Standard library only. It starts a stub chat-completions server on 127.0.0.1 in its own
process (``stub.py``), so the stub's work never counts as the client's, and prints one row
per measurement: plainagent's median with its min and max, the floor's, their ratio, and the
target. The floors (``floors.py``) do the same work by hand over bare urllib and json, and
send the same bytes: the run checks that through the stub before it measures anything.

Both sides of a row are measured in the same run, taking turns, so their ratio holds on a
busy machine even when the times move. Times are wall clock (``perf_counter``) per unit:
per import, per call, per model call of a run ("step"). The CPU column is the ratio of CPU
time: this process's (``process_time``: the client, not the stub), or the child's for the
rows run in a fresh interpreter. Targets are judged on the wall-clock medians and, where the
CPU time was measured, on it too: the verdict says which clock misses.
"""

import argparse
import ast
import cProfile
import itertools
import json
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(1, str(ROOT))  # after bench/ itself: the modules under test sit one level up

import floors  # noqa: E402
from measure import Row, Sample, amount, children_cpu, interleaved, machine, table  # noqa: E402
from stub import ANSWER, PARALLEL_CALLS, Stub, completion, tool_calls_message  # noqa: E402
from workload import LOOKUP_WIRE, MODEL, SYSTEM, TOOL_WAIT_SECONDS, USER, lookup, wait, wire_history  # noqa: E402

import llm_client  # noqa: E402
from agent import LlmCall, agent_life_cycle  # noqa: E402
from fake_llm import FakeLlm  # noqa: E402
from llm_client import LlmClient, LlmRequest  # noqa: E402
from messages import Message, ToolCall, ToolResult  # noqa: E402
from tools import make_tool_set, tool  # noqa: E402

OURS = ["messages", "tools", "llm_client", "agent", "fake_llm"]
LOOKUP_TOOLS = make_tool_set([tool(lookup)])
WAIT_TOOLS = make_tool_set([tool(wait)])
GROWTH_SIZES = (10, 100, 1000)
MEMORY_MESSAGES = 1000


# --- runs against the stub ------------------------------------------------------------------

_runs = itertools.count()


def run_id() -> str:
    """Return a token no other run uses: the stub counts requests per run."""
    return f"run{next(_runs)}"


def client(stub: Stub, script: str, run: str) -> LlmClient:
    """Return a client for one run of a stub script (no key, no retries)."""
    return LlmClient(MODEL, stub.url(script, run), api_key="", max_retries=0)


def history(size: int) -> list:
    """Return ``wire_history(size)`` as plainagent's messages."""
    conversation: list = [Message("system", SYSTEM), Message("user", USER)]
    for n in range((size - 2) // 2):
        conversation += [ToolCall(f"h_{n}", "lookup", {"n": n}), ToolResult(f"h_{n}", "lookup", lookup(n))]
    return conversation


def expect(units: int, as_expected: bool, what: str) -> int:
    """Return ``units`` of work done; stop the benchmark if the work did not end as it should."""
    if not as_expected:
        sys.exit(f"bench: {what} did not end as scripted")
    return units


# --- the two sides of each row: a function that does some units of work and says how many ---


def ours_call(stub: Stub, stream: bool, run: str = "one") -> Callable[[], int]:
    """One ``LlmClient.generate`` call that gets the answer."""
    the_client = client(stub, "tools-0-sse" if stream else "tools-0", run)
    request = LlmRequest(contents=history(2), tools=list(LOOKUP_TOOLS.values()), tool_choice="auto")
    pieces: list[str] = []
    on_text = pieces.append if stream else None
    return lambda: expect(1, the_client.generate(request, on_text=on_text).text == ANSWER, "a call")


def floor_call(stub: Stub, stream: bool, run: str = "one") -> Callable[[], int]:
    """The same call by hand."""
    body = floors.request_body(wire_history(2), LOOKUP_WIRE)
    if stream:
        url, pieces = stub.url("tools-0-sse", run), []  # type: str, list[str]
        return lambda: expect(1, floors.post_streaming(url, body, pieces.append)["content"] == ANSWER, "a floor call")
    url = stub.url("tools-0", run)
    return lambda: expect(1, floors.post(url, body)["choices"][0]["message"]["content"] == ANSWER, "a floor call")


def ours_run(stub: Stub, rounds: int, size: int = 2, run_name: Callable[[], str] = run_id) -> Callable[[], int]:
    """An agent run from a conversation of ``size`` messages: ``rounds`` tool rounds, then the answer."""
    start = history(size)

    def run() -> int:
        llm_call = LlmCall(client(stub, f"tools-{rounds}", run_name()))
        conversation = agent_life_cycle(
            None, None, llm_call, tool_set=LOOKUP_TOOLS, history=start, max_steps=rounds + 1
        )
        return expect(rounds + 1, len(conversation) == size + 2 * rounds + 1, "an agent run")

    return run


def floor_run(stub: Stub, rounds: int, size: int = 2, run_name: Callable[[], str] = run_id) -> Callable[[], int]:
    """The same run by the hand-written loop."""
    start = wire_history(size)

    def run() -> int:
        url, messages = stub.url(f"tools-{rounds}", run_name()), list(start)
        steps = floors.run_loop(lambda body: floors.post(url, body), messages, LOOKUP_WIRE, rounds + 1)
        return expect(steps, len(messages) == size + 2 * rounds + 1, "a floor run")

    return run


def ours_fake_run(size: int) -> Callable[[], int]:
    """An agent run on ``FakeLlm`` from ``size`` messages: one tool round, then the answer."""
    start = history(size)

    def run() -> int:
        fake = FakeLlm([ToolCall("call_0", "lookup", {"n": 0}), ANSWER])
        conversation = agent_life_cycle(None, None, LlmCall(fake), tool_set=LOOKUP_TOOLS, history=start, max_steps=2)
        return expect(2, len(conversation) == size + 3, "a FakeLlm run")

    return run


def floor_fake_run(size: int) -> Callable[[], int]:
    """The same run by the hand-written loop, its model a list of parsed replies."""
    start = wire_history(size)
    replies = [
        completion(tool_calls_message("lookup", range(1)), "tool_calls"),
        completion({"role": "assistant", "content": ANSWER}, "stop"),
    ]

    def run() -> int:
        script, messages = iter(replies), list(start)
        steps = floors.run_loop(lambda body: next(script), messages, LOOKUP_WIRE, 2)
        return expect(steps, len(messages) == size + 3, "a scripted floor run")

    return run


def encode_body(size: int, batch: int) -> Callable[[], int]:
    """``json.dumps`` of the request body at ``size`` messages, ``batch`` times."""
    body = floors.request_body(wire_history(size), LOOKUP_WIRE)

    def run() -> int:
        for _ in range(batch):
            json.dumps(body)
        return batch

    return run


def ours_parallel(stub: Stub) -> Callable[[], int]:
    """An agent run whose first reply asks for ``PARALLEL_CALLS`` calls to the 50 ms ``wait`` tool."""

    def run() -> int:
        llm_call = LlmCall(client(stub, "parallel", run_id()))
        conversation = agent_life_cycle(SYSTEM, USER, llm_call, tool_set=WAIT_TOOLS, max_steps=2)
        return expect(1, len(conversation) == 3 + 2 * PARALLEL_CALLS, "the parallel run")

    return run


# --- checks: the floors send the bytes plainagent sends --------------------------------------


def check_same_requests(stub: Stub) -> None:
    """Run each comparison once as the stub's ``check`` runs and compare the request bodies.

    Exits with a message when a floor sent other bytes than plainagent: its row would then
    compare different work.
    """
    checks = [
        ("check-call", ours_call(stub, False, "check-call-ours"), floor_call(stub, False, "check-call-floor")),
        ("check-sse", ours_call(stub, True, "check-sse-ours"), floor_call(stub, True, "check-sse-floor")),
        (
            "check-run",
            ours_run(stub, 3, 10, lambda: "check-run-ours"),
            floor_run(stub, 3, 10, lambda: "check-run-floor"),
        ),
    ]
    for name, ours, floor in checks:
        ours(), floor()
        sent = stub.digests(f"{name}-ours")
        if not sent or sent != stub.digests(f"{name}-floor"):
            sys.exit(f"bench: the floor sends other request bodies than plainagent ({name})")


# --- the rows ------------------------------------------------------------------------------


@dataclass
class Settings:
    """Repetitions per group of rows: the full run, or ``--quick`` (proves it works, rough numbers)."""

    imports: int = 30
    calls: int = 300
    steps_10: int = 40
    steps_100: int = 10
    fake: int = 3000
    growth: int = 60
    parallel: int = 20
    memory: int = 5


QUICK = Settings(imports=1, calls=5, steps_10=2, steps_100=1, fake=20, growth=2, parallel=1, memory=1)


def stdlib_imports() -> list:
    """Return the standard-library modules our five modules import at their top level."""
    names: set[str] = set()
    for module in OURS:
        for node in ast.parse((ROOT / f"{module}.py").read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
    return sorted(names - set(OURS))


def fresh_interpreter(code: str, folder: str, env: dict) -> Callable[[], int]:
    """Run ``code`` in a new interpreter without the site module (``-S``), so that what this
    machine's site-packages ``.pth`` files import counts on neither side."""

    def run() -> int:
        subprocess.run([sys.executable, "-S", "-c", code], cwd=folder, env=env, check=True)
        return 1

    return run


def import_rows(repeats: int) -> list:
    """Fresh interpreters importing our five modules, their stdlib imports only, or nothing.

    Our modules are copied to a temporary folder, whose ``__pycache__`` then holds their
    bytecode as the standard library's holds its own; a second set of runs forbids writing
    bytecode (``PYTHONDONTWRITEBYTECODE``), so our modules are compiled on every import.
    """
    ours, floor = f"import {', '.join(OURS)}", f"import {', '.join(stdlib_imports())}"
    cached = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    uncached = dict(cached, PYTHONDONTWRITEBYTECODE="1")
    with tempfile.TemporaryDirectory() as folder, tempfile.TemporaryDirectory() as source_only:
        for module in OURS:
            shutil.copy(ROOT / f"{module}.py", folder)
            shutil.copy(ROOT / f"{module}.py", source_only)
        samples = interleaved(
            repeats,
            {
                "ours": fresh_interpreter(ours, folder, cached),
                "floor": fresh_interpreter(floor, folder, cached),
                "bare": fresh_interpreter("pass", folder, cached),
                "source": fresh_interpreter(ours, source_only, uncached),
            },
            cpu_clock=children_cpu,
        )
    return [
        Row(
            "import: plainagent vs its stdlib floor",
            samples["ours"],
            samples["floor"],
            "the same stdlib imports",
            at_most=1.2,
        ),
        Row("import: plainagent vs a bare interpreter", samples["ours"], samples["bare"], "python -S -c pass"),
        Row("import: plainagent compiled from source", samples["source"], samples["floor"], "the same stdlib imports"),
    ]


def call_rows(stub: Stub, repeats: int) -> list:
    """One ``LlmClient.generate`` call, plain and streamed, against the same call by hand."""
    samples = interleaved(
        repeats,
        {
            "json": ours_call(stub, False),
            "json floor": floor_call(stub, False),
            "sse": ours_call(stub, True),
            "sse floor": floor_call(stub, True),
        },
    )
    return [
        Row(
            f"one call: LlmClient.generate, {kind}",
            samples[key],
            samples[f"{key} floor"],
            "bare urllib + json",
            at_most=1.15,
        )
        for kind, key in [("JSON", "json"), ("streamed", "sse")]
    ]


def step_rows(stub: Stub, settings: Settings) -> list:
    """Agent runs of K tool rounds per model call (step), against the hand-written loop; and
    on ``FakeLlm``, without HTTP."""
    rows = []
    for rounds, repeats in [(10, settings.steps_10), (100, settings.steps_100)]:
        samples = interleaved(repeats, {"ours": ours_run(stub, rounds), "floor": floor_run(stub, rounds)})
        rows.append(
            Row(
                f"agent step: K = {rounds} tool rounds",
                samples["ours"],
                samples["floor"],
                "hand-written urllib loop",
                at_most=1.2,
            )
        )
    samples = interleaved(settings.fake, {"ours": ours_fake_run(10), "floor": floor_fake_run(10)})
    rows.append(
        Row(
            "agent step: FakeLlm, 10 messages",
            samples["ours"],
            samples["floor"],
            "hand-written loop, no HTTP",
            under=1e-4,
        )
    )
    return rows


def growth_rows(stub: Stub, repeats: int) -> list:
    """A step of a run continued from 10, 100 and 1,000 messages, against encoding its request
    body; and the cost each added message adds, between those sizes."""
    functions = {}
    for size in GROWTH_SIZES:
        functions[f"ours {size}"] = ours_run(stub, 1, size)
        functions[f"dumps {size}"] = encode_body(size, max(1, 1000 // size))
    functions["floor 1000"] = floor_run(stub, 1, 1000)
    samples = interleaved(repeats, functions)
    rows = [
        Row(
            f"growth: step at {size:,} messages",
            samples[f"ours {size}"],
            samples[f"dumps {size}"],
            "json.dumps(body)",
            at_most=2.0 if size == 1000 else None,
        )
        for size in GROWTH_SIZES
    ]
    rows.append(
        Row(
            "growth: hand-written step at 1,000 messages",
            samples["floor 1000"],
            samples["dumps 1000"],
            "json.dumps(body)",
        )
    )
    for small, large in itertools.pairwise(GROWTH_SIZES):
        ours, dumps = (
            slope(samples[f"{side} {small}"], samples[f"{side} {large}"], large - small) for side in ("ours", "dumps")
        )
        rows.append(Row(f"growth: added cost per message, {small:,} to {large:,}", ours, dumps, "json.dumps(body)"))
    return rows


def slope(small: Sample, large: Sample, messages: int) -> Sample:
    """The added cost per message between two sizes, round by round."""
    return Sample(
        [(b - a) / messages for a, b in zip(small.wall, large.wall, strict=True)],
        [(b - a) / messages for a, b in zip(small.cpu, large.cpu, strict=True)],
    )


def parallel_row(stub: Stub, repeats: int) -> Row:
    """A run whose reply asks for 8 tools that each wait 50 ms, against one tool's wait."""
    ours = interleaved(repeats, {"ours": ours_parallel(stub)})["ours"]
    one_tool = Sample([TOOL_WAIT_SECONDS], [])
    return Row(
        f"parallel tools: {PARALLEL_CALLS} x 50 ms tools, whole run", ours, one_tool, "one tool's 50 ms", under=0.1
    )


def memory_rows(stub: Stub, repeats: int) -> list:
    """Peak RSS in a fresh interpreter, once the imports are done and after a 1,000-message run:
    plainagent's and the floor's, run side by side (memory does not depend on the timing)."""
    peaks: dict[str, list] = {"ours imports": [], "floor imports": [], "ours": [], "floor": []}
    for _ in range(repeats):
        children = {
            side: subprocess.Popen(
                [
                    sys.executable,
                    str(Path(__file__).with_name("peak_rss.py")),
                    side,
                    str(stub.port),
                    run_id(),
                    str(MEMORY_MESSAGES),
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            for side in ("ours", "floor")
        }
        for side, child in children.items():
            imported, peak, messages = child.communicate(timeout=300)[0].split()
            expect(1, child.returncode == 0 and int(messages) == MEMORY_MESSAGES + 1, f"the {side} memory run")
            peaks[f"{side} imports"].append(int(imported))
            peaks[side].append(int(peak))
    samples = {name: Sample(values, []) for name, values in peaks.items()}
    return [
        Row(
            "memory: peak RSS after the imports",
            samples["ours imports"],
            samples["floor imports"],
            "the floor's imports",
            unit="B",
        ),
        Row(
            f"memory: peak RSS, {MEMORY_MESSAGES:,}-message run",
            samples["ours"],
            samples["floor"],
            "hand-written urllib loop",
            unit="B",
        ),
    ]


# --- where the time goes --------------------------------------------------------------------


def profile(stub: Stub) -> None:
    """Print where plainagent's side of the step and growth rows spends its time.

    First cProfile's view, our functions and json's by cumulative time (the profiler slows
    many small Python calls more than C code); then, without the profiler, the request body
    at 1,000 messages: building its messages, of which re-encoding the tool calls' arguments,
    against encoding the body.
    """
    for name, run, repeats in [
        ("agent step: K = 10 tool rounds", ours_run(stub, 10), 50),
        ("agent step: K = 100 tool rounds", ours_run(stub, 100), 5),
        ("growth: step at 1,000 messages", ours_run(stub, 1, 1000), 20),
    ]:
        run()
        profiler = cProfile.Profile()
        steps = sum(profiler.runcall(run) for _ in range(repeats))
        print(f"\n{name}: {steps} model calls (steps) under cProfile")
        stats = pstats.Stats(profiler, stream=sys.stdout).sort_stats("cumulative")
        stats.print_stats(r"(agent|llm_client|tools|messages)\.py|json/__init__\.py|request\.py.*\(urlopen\)", 16)
    request = LlmRequest(contents=history(1000), tools=list(LOOKUP_TOOLS.values()), tool_choice="auto")
    arguments = [message.arguments for message in request.contents if isinstance(message, ToolCall)]

    def build_messages() -> int:
        llm_client._build_messages(request)
        return 1

    def encode_arguments() -> int:
        for one in arguments:
            json.dumps(one, ensure_ascii=False)  # what llm_client._wire_tool_call does for each
        return 1

    samples = interleaved(50, {"build": build_messages, "arguments": encode_arguments, "body": encode_body(1000, 1)})
    print(
        f"\nthe request body at 1,000 messages, without the profiler (medians of 50): "
        f"_build_messages {amount(samples['build'].median, 's')}, of which re-encoding {len(arguments)} "
        f"tool calls' arguments {amount(samples['arguments'].median, 's')}; "
        f"json.dumps(body) {amount(samples['body'].median, 's')}"
    )


def main(argv: list | None = None) -> int:
    """Run the benchmark (or the profile) and print the table; return the exit status."""
    parser = argparse.ArgumentParser(description="Measure what plainagent costs against the standard library's floor.")
    parser.add_argument("--quick", action="store_true", help="a few repetitions only: proves it runs; rough numbers")
    parser.add_argument("--profile", action="store_true", help="profile plainagent's agent steps instead of timing")
    arguments = parser.parse_args(argv)
    if arguments.profile:
        with Stub() as stub:
            profile(stub)
        return 0
    settings = QUICK if arguments.quick else Settings()
    started = time.perf_counter()
    print(machine(), flush=True)
    rows = import_rows(settings.imports)
    with Stub() as stub:
        check_same_requests(stub)
        rows += call_rows(stub, settings.calls)
        rows += step_rows(stub, settings)
        rows += growth_rows(stub, settings.growth)
        rows.append(parallel_row(stub, settings.parallel))
        rows += memory_rows(stub, settings.memory)
    print(
        f"medians of interleaved repetitions ({'quick' if settings is QUICK else 'full'} run, "
        f"{time.perf_counter() - started:.0f} s); wall-clock time per unit; ratio = plainagent / floor\n"
    )
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
