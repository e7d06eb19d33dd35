"""The benchmark still works: ``python bench/run.py --quick`` prints every row with its floor
and ratio. Nothing here looks at a time: speed is measured by the benchmark, never in a test."""

import os
import re
import subprocess
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent

ROWS = [
    "import: plainagent vs its stdlib floor",
    "import: plainagent vs a bare interpreter",
    "import: plainagent compiled from source",
    "one call: LlmClient.generate, JSON",
    "one call: LlmClient.generate, streamed",
    "agent step: K = 10 tool rounds",
    "agent step: K = 100 tool rounds",
    "agent step: FakeLlm, 10 messages",
    "growth: step at 10 messages",
    "growth: step at 100 messages",
    "growth: step at 1,000 messages",
    "growth: hand-written step at 1,000 messages",
    "growth: added cost per message, 10 to 100",
    "growth: added cost per message, 100 to 1,000",
    "parallel tools: 8 x 50 ms tools, whole run",
    "memory: peak RSS after the imports",
    "memory: peak RSS, 1,000-message run",
]
AMOUNT = r"-?[\d.]+ (us|ms|MB) \[-?[\d.]+ (us|ms|MB) to -?[\d.]+ (us|ms|MB)\]"


def test_the_quick_benchmark_prints_every_row_with_a_floor_and_a_ratio(tmp_path):
    env = dict(os.environ, TMPDIR=str(tmp_path))  # the import rows' temporary folders go under tmp_path
    done = subprocess.run(
        [sys.executable, str(PROJECT / "bench" / "run.py"), "--quick"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert (done.returncode, done.stderr) == (0, "")
    lines = [line for line in done.stdout.splitlines() if line.startswith("|")][2:]  # after the header lines
    table = {cells[0]: cells[1:] for cells in ([cell.strip() for cell in line.strip("|").split("|")] for line in lines)}
    assert list(table) == ROWS
    for name, (ours, floor, ratio, _cpu, _target) in table.items():
        assert re.fullmatch(AMOUNT, ours), name
        assert re.fullmatch(r"[^:]+: " + AMOUNT, floor), name
        assert re.fullmatch(r"-?\d+\.\d\dx", ratio), name
