"""The benchmark's workload: what both sides of every comparison do, in the wire form.

The same system and user messages, the same tool functions, the same conversation of a
given length, as the wire dicts a hand-written loop keeps; ``run.py`` builds plainagent's
form of the same. Standard library only, so that the floors' memory holds no plainagent
module. The tool results are ``RECORD_CHARS`` characters long, a short file excerpt or a
search hit.
"""

import json
import time

MODEL = "bench-model"
SYSTEM = "You are a benchmark agent. Look records up with the lookup tool until you have them all."
USER = "Look up the records, then say you are done."
RECORD_CHARS = 200
TOOL_WAIT_SECONDS = 0.05


def lookup(n: int) -> str:
    """Return the text of record n.

    Args:
        n: The record's number.
    """
    return (f"record {n}: " + "lorem ipsum dolor sit amet " * 8)[:RECORD_CHARS]


def wait(n: int) -> str:
    """Wait ``TOOL_WAIT_SECONDS``, as a tool that calls a slow service does, and say so.

    Args:
        n: The call's number.
    """
    time.sleep(TOOL_WAIT_SECONDS)
    return f"waited {n}"


FUNCTIONS = {"lookup": lookup, "wait": wait}

# What a hand-written program would type for the same tool: the body plainagent derives.
LOOKUP_WIRE = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Return the text of record n.",
            "parameters": {
                "type": "object",
                "properties": {"n": {"type": "integer", "description": "The record's number."}},
                "required": ["n"],
                "additionalProperties": False,
            },
        },
    }
]


def wire_history(size: int) -> list:
    """Return a conversation of ``size`` messages (at least 2) as wire messages: the system and
    user messages, then rounds of one lookup call and its result."""
    messages: list = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]
    for n in range((size - 2) // 2):
        call = {"id": f"h_{n}", "type": "function", "function": {"name": "lookup", "arguments": json.dumps({"n": n})}}
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"h_{n}", "content": lookup(n)})
    return messages
