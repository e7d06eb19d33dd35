"""Every module's docstring examples run, so the documentation cannot go stale."""

import doctest

import pytest

import agent
import fake_llm
import llm_client
import messages
import tools


@pytest.mark.parametrize("module", [messages, tools, llm_client, agent, fake_llm], ids=lambda module: module.__name__)
def test_the_module_docstring_examples_pass(module):
    failed, attempted = doctest.testmod(module)
    assert (failed, attempted > 0) == (0, True)
