"""Print the peak memory of one agent run against the stub, in a fresh interpreter.

    python bench/peak_rss.py ours|floor PORT RUN MESSAGES

``run.py`` starts this as a child so that each side's memory holds only what that side
imports: plainagent's modules, or the hand-written floor's. The run starts from the system
and user messages and makes tool rounds until the conversation holds ``MESSAGES``
messages, then gets the answer. Prints the peak RSS in bytes once the imports are done and
once the run is done, then the number of messages in the conversation.
"""

import resource
import sys
from pathlib import Path


def peak_rss() -> int:
    """Return the peak resident memory of this process, in bytes.

    On Linux this is ``VmHWM``: ``ru_maxrss`` survives ``exec``, so in a child it would also
    count the parent it was forked from (the benchmark, larger than either run).
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB elsewhere


def main() -> None:
    side, port, run, messages = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    rounds = (messages - 2) // 2
    base_url = f"http://127.0.0.1:{port}/tools-{rounds}/{run}/v1"
    if side == "ours":
        sys.path.insert(1, str(Path(__file__).resolve().parent.parent))
        from workload import MODEL, SYSTEM, USER, lookup

        from agent import LlmCall, agent_life_cycle
        from llm_client import LlmClient
        from tools import make_tool_set, tool

        imported = peak_rss()
        llm_call = LlmCall(LlmClient(MODEL, base_url, api_key="", max_retries=0))
        tool_set = make_tool_set([tool(lookup)])
        conversation = agent_life_cycle(SYSTEM, USER, llm_call, tool_set=tool_set, max_steps=rounds + 1)
    else:
        import floors
        from workload import LOOKUP_WIRE, wire_history

        imported = peak_rss()
        conversation = wire_history(2)
        floors.run_loop(lambda body: floors.post(base_url, body), conversation, LOOKUP_WIRE, rounds + 1)
    print(imported, peak_rss(), len(conversation))


if __name__ == "__main__":
    main()
