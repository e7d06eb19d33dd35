"""Tools: schemas from type hints and docstrings, and running tool calls into results."""

import enum
import pathlib
import subprocess
import sys
import threading
from typing import Literal, Optional, Union

import pytest

from messages import ToolCall, ToolResult
from tools import Tool, execute_tool_call, make_tool_set, tool

PROJECT = pathlib.Path(__file__).resolve().parent.parent


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Point:
    """A class with no JSON-schema form."""


def schema_of(annotation):
    """Return the schema @tool gives one parameter annotated with ``annotation``."""

    def probe(value: annotation) -> str:
        return ""

    return tool(probe).parameters["properties"]["value"]


@tool
def add(a: int, b: int = 0) -> int:
    """Add two integers."""
    return a + b


@tool
def paint(color: Color) -> str:
    """Paint in one color."""
    return color.name


@tool
def total(numbers: list[int]) -> int:
    """Add up numbers."""
    return sum(numbers)


@tool
def echo(text: str) -> str:
    """Say it back."""
    return text


# --- schemas -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "annotation, schema",
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (list[str], {"type": "array", "items": {"type": "string"}}),
        (list[list[int]], {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}}),
        (dict[str, float], {"type": "object", "additionalProperties": {"type": "number"}}),
        (Union[int, None], {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
        (Optional[str], {"anyOf": [{"type": "string"}, {"type": "null"}]}),
        (Union[int, str], {"anyOf": [{"type": "integer"}, {"type": "string"}]}),
        (Literal["fast", "slow"], {"enum": ["fast", "slow"]}),
        (Color, {"enum": ["red", "green"]}),
    ],
    ids=repr,
)
def test_an_annotation_becomes_its_json_schema(annotation, schema):
    assert schema_of(annotation) == schema


def test_the_pipe_union_with_none_becomes_any_of_with_null():
    assert schema_of(int | None) == {"anyOf": [{"type": "integer"}, {"type": "null"}]}


def test_a_parameter_with_a_default_is_not_required_and_records_the_default():
    @tool
    def search(query: str, limit: int = 10, exact: bool = False, site: str | None = None) -> str:
        """Search."""
        return ""

    assert search.parameters == {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"type": "integer", "default": 10},
            "exact": {"type": "boolean", "default": False},
            "site": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
        },
        "required": ["query"],
        "additionalProperties": False,
    }


def test_the_docstring_gives_the_description_and_each_parameter_description():
    @tool
    def read_file(path: str, start: int = 1) -> str:
        """Read a text file.

        Returns the lines as they are.

        Args:
            path: The file to read,
                relative to the project root.
            start (int): The first line to return.

        Returns:
            The text.
        """
        return ""

    assert read_file.description == "Read a text file.\n\nReturns the lines as they are."
    assert read_file.parameters["properties"] == {
        "path": {"type": "string", "description": "The file to read, relative to the project root."},
        "start": {"type": "integer", "description": "The first line to return.", "default": 1},
    }


def test_tool_takes_a_name_and_a_timeout():
    @tool(name="lookup", timeout=2.5)
    def find(key: str) -> str:
        """Find a key."""
        return key

    assert (find.name, find.timeout, find.description) == ("lookup", 2.5, "Find a key.")


def test_a_decorated_function_can_still_be_called():
    assert add(2, b=3) == 5


def test_tool_definition_is_the_openai_function_form():
    assert add.tool_definition() == {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer", "default": 0}},
                "required": ["a"],
                "additionalProperties": False,
            },
        },
    }


@pytest.mark.parametrize("annotation", [Point, set[int], tuple, tuple[int, int], dict[int, str], bytes], ids=repr)
def test_an_annotation_with_no_schema_raises_type_error_naming_the_parameter(annotation):
    def place(where: annotation) -> str:
        """Place it."""
        return ""

    with pytest.raises(TypeError, match="^parameter 'where' of place: annotation .* has no JSON-schema form; use str"):
        tool(place)


def test_a_parameter_without_an_annotation_raises_type_error_naming_it():
    def greet(name) -> str:
        """Greet."""
        return name

    with pytest.raises(TypeError) as raised:
        tool(greet)
    assert str(raised.value) == "parameter 'name' of greet needs a type annotation"


def test_star_arguments_raise_type_error_naming_them():
    def gather(*parts: str) -> str:
        """Gather."""
        return ""

    with pytest.raises(TypeError) as raised:
        tool(gather)
    assert str(raised.value) == "parameter 'parts' of gather: *args and **kwargs cannot be described"


def test_a_duplicate_tool_name_raises_value_error():
    @tool(name="add")
    def other_add(a: int) -> int:
        """Add."""
        return a

    with pytest.raises(ValueError) as raised:
        make_tool_set([add, other_add])
    assert str(raised.value) == "duplicate tool name 'add': each tool needs its own name"


def test_make_tool_set_indexes_tools_by_name():
    assert make_tool_set([add, echo]) == {"add": add, "echo": echo}


# --- running tool calls --------------------------------------------------------------------


def run(tool_call, *tools):
    return execute_tool_call(tool_call, make_tool_set(tools))


def test_a_string_result_is_returned_as_it_is():
    assert run(ToolCall("call_1", "echo", {"text": "hi [1]"}), echo) == ToolResult("call_1", "echo", "hi [1]")


def test_a_number_result_is_returned_as_json_text():
    assert run(ToolCall("call_1", "add", {"a": 2, "b": 3}), add) == ToolResult("call_1", "add", "5")


def test_a_dict_result_is_returned_as_json_text():
    @tool
    def info() -> dict:
        """Info."""
        return {"name": "Zoë", "tags": ["a"]}

    assert run(ToolCall("call_1", "info", {}), info).content == '{"name": "Zoë", "tags": ["a"]}'


def test_a_list_result_is_returned_as_json_text():
    @tool
    def items() -> list:
        """Items."""
        return [1, "two", None]

    assert run(ToolCall("call_1", "items", {}), items).content == '[1, "two", null]'


def test_an_unknown_tool_is_reported_naming_the_known_tools():
    assert run(ToolCall("call_1", "serach", {}), echo, add) == ToolResult(
        "call_1", "serach", "unknown tool 'serach'; known tools: add, echo", is_error=True
    )


def test_an_unknown_tool_with_no_tools_at_all_says_none():
    assert run(ToolCall("call_1", "echo", {})).content == "unknown tool 'echo'; known tools: (none)"


def test_arguments_that_are_not_json_are_quoted_with_the_expected_schema():
    result = run(ToolCall.from_arguments_text("call_1", "echo", '{"text": "hi'), echo)
    assert result == ToolResult(
        "call_1",
        "echo",
        'arguments for tool \'echo\' are not a JSON object: "{\\"text\\": \\"hi"; expected a JSON object '
        'matching {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"], '
        '"additionalProperties": false}',
        is_error=True,
    )


def test_long_arguments_that_are_not_json_are_quoted_cut_short():
    result = run(ToolCall.from_arguments_text("call_1", "echo", "x" * 5000), echo)
    assert result.content.startswith(
        "arguments for tool 'echo' are not a JSON object: \"" + "x" * 200 + '" (truncated, 5000 characters); '
    )


def test_a_missing_required_argument_is_named_with_its_type():
    assert run(ToolCall("call_1", "add", {"b": 1}), add) == ToolResult(
        "call_1", "add", "invalid arguments for tool 'add': missing required argument 'a' (integer)", is_error=True
    )


def test_an_argument_of_the_wrong_type_is_named_with_the_expected_type():
    assert run(ToolCall("call_1", "add", {"a": "two"}), add).content == (
        "invalid arguments for tool 'add': argument 'a': expected integer, got string 'two'"
    )


def test_a_boolean_is_not_an_integer():
    assert run(ToolCall("call_1", "add", {"a": True}), add).content == (
        "invalid arguments for tool 'add': argument 'a': expected integer, got boolean True"
    )


def test_a_whole_float_is_not_an_integer():
    assert run(ToolCall("call_1", "add", {"a": 2.0}), add).content == (
        "invalid arguments for tool 'add': argument 'a': expected integer, got number 2.0"
    )


def test_a_value_outside_the_enum_is_named_with_the_allowed_values():
    assert run(ToolCall("call_1", "paint", {"color": "blue"}), paint).content == (
        "invalid arguments for tool 'paint': argument 'color': expected one of \"red\", \"green\", got string 'blue'"
    )


def test_an_unknown_argument_is_named_with_the_expected_arguments():
    assert run(ToolCall("call_1", "add", {"a": 1, "c": 2}), add).content == (
        "invalid arguments for tool 'add': unknown argument 'c'; expected arguments: a, b"
    )


def test_a_bad_item_in_a_list_is_named_by_its_index():
    assert run(ToolCall("call_1", "total", {"numbers": [1, "x", 3]}), total).content == (
        "invalid arguments for tool 'total': argument 'numbers[1]': expected integer, got string 'x'"
    )


def test_a_value_fitting_no_option_of_a_union_names_every_option():
    @tool
    def limit(count: int | None) -> str:
        """Limit."""
        return str(count)

    assert run(ToolCall("call_1", "limit", {"count": "3"}), limit).content == (
        "invalid arguments for tool 'limit': argument 'count': expected integer or null, got string '3'"
    )


def test_null_is_accepted_for_an_optional_argument():
    @tool
    def limit(count: int | None) -> str:
        """Limit."""
        return str(count)

    assert run(ToolCall("call_1", "limit", {"count": None}), limit) == ToolResult("call_1", "limit", "None")


def test_a_raising_tool_is_reported_with_the_exception_type_and_message():
    @tool
    def fail() -> str:
        """Fail."""
        raise KeyError("missing")

    assert run(ToolCall("call_1", "fail", {}), fail) == ToolResult(
        "call_1", "fail", "tool 'fail' raised KeyError: 'missing'", is_error=True
    )


def test_an_enum_argument_arrives_as_the_enum_member():
    received = []

    @tool
    def choose(color: Color) -> str:
        """Choose."""
        received.append(color)
        return "ok"

    run(ToolCall("call_1", "choose", {"color": "green"}), choose)
    assert received == [Color.GREEN]


def test_an_optional_enum_argument_arrives_as_the_enum_member_or_none():
    received = []

    @tool
    def choose(color: Color | None = None) -> str:
        """Choose."""
        received.append(color)
        return "ok"

    run(ToolCall("call_1", "choose", {"color": "red"}), choose)
    run(ToolCall("call_2", "choose", {"color": None}), choose)
    assert received == [Color.RED, None]


def test_a_tool_past_its_timeout_gives_an_error_result():
    release = threading.Event()

    @tool(timeout=0.01)
    def hang() -> str:
        """Hang."""
        release.wait(60)
        return "late"

    try:
        result = run(ToolCall("call_1", "hang", {}), hang)
    finally:
        release.set()
    assert result == ToolResult("call_1", "hang", "tool 'hang' did not finish within 0.01 s", is_error=True)


def test_a_tool_within_its_timeout_returns_its_result():
    @tool(timeout=60)
    def quick() -> str:
        """Quick."""
        return "done"

    assert run(ToolCall("call_1", "quick", {}), quick) == ToolResult("call_1", "quick", "done")


def test_oversized_output_is_cut_with_a_marker_giving_the_original_length():
    @tool
    def flood() -> str:
        """Flood."""
        return "x" * 25_000

    assert run(ToolCall("call_1", "flood", {}), flood).content == (
        "x" * 20_000 + "\n[output truncated: showing 20000 of 25000 characters]"
    )


def test_output_at_exactly_the_limit_is_not_cut():
    @tool
    def fill() -> str:
        """Fill."""
        return "x" * 20_000

    assert run(ToolCall("call_1", "fill", {}), fill).content == "x" * 20_000


def test_a_tool_built_without_the_decorator_runs():
    square = Tool("square", "Square a number.", {"type": "object", "properties": {}}, lambda n=3: n * n)
    assert run(ToolCall("call_1", "square", {"n": 4}), square) == ToolResult("call_1", "square", "16")


def test_a_tool_that_raises_timeout_error_itself_reports_it_as_raised():
    @tool
    def fetch() -> str:
        """Fetch something slow."""
        raise TimeoutError("upstream timed out")

    assert run(ToolCall("call_1", "fetch", {}), fetch) == ToolResult(
        "call_1", "fetch", "tool 'fetch' raised TimeoutError: upstream timed out", is_error=True
    )


def test_a_tool_with_a_timeout_that_raises_timeout_error_is_not_reported_as_overrunning():
    @tool(timeout=60)
    def fetch() -> str:
        """Fetch something slow."""
        raise TimeoutError("upstream timed out")

    assert run(ToolCall("call_1", "fetch", {}), fetch).content == "tool 'fetch' raised TimeoutError: upstream timed out"


def test_a_return_value_json_cannot_hold_is_given_as_its_repr():
    @tool
    def pairs() -> dict:
        """Return pairs."""
        return {(1, 2): "x"}

    assert run(ToolCall("call_1", "pairs", {}), pairs) == ToolResult("call_1", "pairs", "{(1, 2): 'x'}")


def test_enum_members_arrive_inside_lists_and_dicts():
    seen = []

    @tool
    def paint_all(colors: list[Color], by_room: dict[str, Color]) -> str:
        """Paint."""
        seen.append((colors, by_room))
        return "ok"

    run(ToolCall("call_1", "paint_all", {"colors": ["red"], "by_room": {"hall": "green"}}), paint_all)
    assert seen == [([Color.RED], {"hall": Color.GREEN})]


def test_a_tool_name_the_wire_cannot_carry_is_refused_at_construction():
    with pytest.raises(ValueError, match="tool name 'my tool!': use 1 to 64 letters, digits"):
        tool(name="my tool!")(lambda: None)


def test_a_tool_hanging_past_its_timeout_does_not_keep_the_process_from_exiting():
    script = (
        "import threading\n"
        "from messages import ToolCall\n"
        "from tools import tool, make_tool_set, execute_tool_call\n"
        "@tool(timeout=0.05)\n"
        "def hang() -> str:\n"
        "    '''Hang.'''\n"
        "    threading.Event().wait(600)\n"
        "print(execute_tool_call(ToolCall('c', 'hang', {}), make_tool_set([hang])).content)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=PROJECT, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "tool 'hang' did not finish within 0.05 s\n")


def test_a_return_value_that_cannot_even_be_repred_still_gives_a_result():
    class Opaque:
        def __str__(self):
            raise RuntimeError("no str")

        def __repr__(self):
            raise RuntimeError("no repr")

    @tool
    def opaque() -> dict:
        """Return something opaque."""
        return {"thing": Opaque()}

    assert run(ToolCall("call_1", "opaque", {}), opaque) == ToolResult(
        "call_1", "opaque", "<a dict that cannot be shown as text>"
    )
