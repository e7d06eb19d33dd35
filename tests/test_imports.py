"""Copyable modules: each imports only the standard library and its left-hand neighbours,
works when copied alone with them, and does nothing at import time."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parent.parent
OURS = ["messages", "tools", "llm_client", "agent", "fake_llm"]
NEIGHBOURS = {
    "messages": [],
    "tools": ["messages"],
    "llm_client": ["tools", "messages"],
    "agent": ["llm_client", "tools", "messages"],
    "fake_llm": ["llm_client", "tools", "messages"],
}

# Prints the modules an import added that are neither standard library nor ours.
REPORT_OUTSIDERS = """
import sys
before = set(sys.modules)
import messages, tools, llm_client, agent, fake_llm
added = set(sys.modules) - before
print(sorted(name for name in added if name.split(".")[0] not in sys.stdlib_module_names | {ours}))
"""


def fresh_python(code, cwd):
    """Run ``code`` in a new interpreter (no bytecode written, no PYTHONPATH); return the process."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, "-B", "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def test_our_modules_import_only_the_standard_library():
    done = fresh_python(REPORT_OUTSIDERS.replace("{ours}", repr(set(OURS))), PROJECT)
    assert (done.returncode, done.stdout, done.stderr) == (0, "[]\n", "")


@pytest.mark.parametrize("module", OURS)
def test_a_module_copied_with_only_its_neighbours_imports_silently_and_creates_no_files(tmp_path, module):
    for name in [module, *NEIGHBOURS[module]]:
        shutil.copy(PROJECT / f"{name}.py", tmp_path)
    files_before = sorted(os.listdir(tmp_path))
    done = fresh_python(f"import {module}", tmp_path)
    assert (done.returncode, done.stdout, done.stderr, sorted(os.listdir(tmp_path))) == (0, "", "", files_before)
