"""Tools: a name, a description, JSON-schema parameters and a Python callable.

``@tool`` builds a ``Tool`` from a plain function: the parameter schema comes from its type
hints, the descriptions from its Google-style docstring. ``make_tool_set`` indexes tools by
name. ``execute_tool_call`` runs one ``ToolCall`` and always returns a ``ToolResult``: every
failure (unknown tool, bad arguments, a tool that raised or hung) becomes an error result the
model can read and act on, so a tool never crashes the agent loop.

Needs ``messages``.

>>> @tool
... def add(a: int, b: int = 0) -> int:
...     '''Add two integers.
...
...     Args:
...         a: The first number.
...         b: The second number.
...     '''
...     return a + b
>>> add.parameters["required"], add.parameters["properties"]["a"]
(['a'], {'type': 'integer', 'description': 'The first number.'})
>>> tools = make_tool_set([add])
>>> execute_tool_call(ToolCall("call_1", "add", {"a": 2, "b": 3}), tools).content
'5'
>>> execute_tool_call(ToolCall("call_2", "add", {"a": "two"}), tools).content
"invalid arguments for tool 'add': argument 'a': expected integer, got string 'two'"
"""

import enum
import inspect
import json
import re
import threading
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Union

from messages import ToolCall, ToolResult

MAX_OUTPUT_CHARS = 20_000
"""Tool output longer than this is cut, with a marker giving the original length."""

QUOTE_CHARS = 200
"""How much of a bad argument string an error result quotes."""


@dataclass
class Tool:
    """A function the model may call, described the way the wire format needs.

    ``parameters`` is a JSON-schema object (``{"type": "object", "properties": ...}``).
    ``timeout`` (seconds) bounds one run of the tool; ``None`` means no bound.
    """

    name: str
    description: str
    parameters: dict
    function: Callable[..., Any]
    timeout: float | None = None

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", self.name):
            raise ValueError(
                f"tool name {self.name!r}: use 1 to 64 letters, digits, '_' or '-' (the wire allows no more)"
            )

    def tool_definition(self) -> dict:
        """Return the OpenAI ``{"type": "function", "function": {...}}`` form of this tool."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the underlying function directly, so a decorated function still works."""
        return self.function(*args, **kwargs)


ToolSet = dict[str, Tool]
"""Tools by name, as ``make_tool_set`` builds them."""


def make_tool_set(tools: typing.Iterable[Tool]) -> ToolSet:
    """Index tools by name; a duplicate name raises ``ValueError`` (the model could not tell them apart)."""
    tool_set: ToolSet = {}
    for one in tools:
        if one.name in tool_set:
            raise ValueError(f"duplicate tool name {one.name!r}: each tool needs its own name")
        tool_set[one.name] = one
    return tool_set


def as_tool_set(tools: ToolSet | typing.Iterable[Tool] | None) -> ToolSet:
    """Return ``tools`` as a ``ToolSet``: a dict as it is, a list (the seed's form) indexed by name."""
    if tools is None:
        return {}
    return tools if isinstance(tools, dict) else make_tool_set(tools)


# --- @tool: schema from type hints, descriptions from the docstring ---------------------


def tool(
    function: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    timeout: float | None = None,
) -> Any:
    """Turn a plain function into a ``Tool``; use as ``@tool`` or ``@tool(name=..., timeout=...)``.

    Raises ``TypeError`` naming the parameter whose annotation has no JSON-schema form.
    """

    def build(func: Callable[..., Any]) -> Tool:
        summary, arg_docs = parse_docstring(inspect.getdoc(func) or "")
        return Tool(
            name=name or func.__name__,
            description=summary,
            parameters=parameters_schema(func, arg_docs),
            function=func,
            timeout=timeout,
        )

    return build(function) if function is not None else build


def parameters_schema(func: Callable[..., Any], arg_docs: dict[str, str]) -> dict:
    """Return the JSON-schema object for the parameters of ``func``."""
    hints = typing.get_type_hints(func)
    properties: dict[str, dict] = {}
    required = []
    for param in inspect.signature(func).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"parameter {param.name!r} of {func.__name__}: *args and **kwargs cannot be described")
        if param.name not in hints:
            raise TypeError(f"parameter {param.name!r} of {func.__name__} needs a type annotation")
        try:
            schema = type_schema(hints[param.name])
        except TypeError as error:
            raise TypeError(f"parameter {param.name!r} of {func.__name__}: {error}") from None
        if param.name in arg_docs:
            schema["description"] = arg_docs[param.name]
        if param.default is param.empty:
            required.append(param.name)
        elif isinstance(param.default, (str, int, float, bool, type(None))):
            schema["default"] = param.default
        properties[param.name] = schema
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


_SIMPLE_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}


def type_schema(annotation: Any) -> dict:
    """Return the JSON schema for one annotation; raise ``TypeError`` for one we cannot map."""
    if annotation in _SIMPLE_TYPES:
        return {"type": _SIMPLE_TYPES[annotation]}
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return {"enum": [member.value for member in annotation]}
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin is list and len(args) == 1:
        return {"type": "array", "items": type_schema(args[0])}
    if origin is dict and len(args) == 2 and args[0] is str:
        return {"type": "object", "additionalProperties": type_schema(args[1])}
    if origin in (Union, types.UnionType):
        options = [type_schema(arg) for arg in args if arg is not type(None)]
        if type(None) in args:
            options.append({"type": "null"})
        return options[0] if len(options) == 1 else {"anyOf": options}
    raise TypeError(
        f"annotation {annotation!r} has no JSON-schema form; use str, int, float, bool, "
        "list[X], dict[str, X], X | None, Literal[...] or an Enum"
    )


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into (description, {parameter: description}).

    The description is everything before the first section header (``Args:``,
    ``Returns:``, ...); parameter lines look like ``name: text`` or ``name (type): text``
    and may continue on more-indented lines.
    """
    summary_lines: list[str] = []
    arg_docs: dict[str, str] = {}
    section, current, entry_indent = None, None, 0
    for line in doc.splitlines():
        indent = len(line) - len(line.lstrip())
        header = re.fullmatch(r"([A-Za-z][\w ]*):\s*", line)
        entry = re.fullmatch(r"\s*\**(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)", line)
        if header and indent == 0:
            section, current = header.group(1).lower(), None
        elif section is None:
            summary_lines.append(line)
        elif section not in ("args", "arguments", "parameters"):
            continue
        elif entry and (current is None or indent <= entry_indent):
            current, entry_indent = entry.group(1), indent
            arg_docs[current] = entry.group(2).strip()
        elif current and line.strip():
            arg_docs[current] = f"{arg_docs[current]} {line.strip()}".strip()
    return "\n".join(summary_lines).strip(), arg_docs


# --- running a tool call -----------------------------------------------------------------


def execute_tool_call(tool_call: ToolCall, tool_set: ToolSet | typing.Iterable[Tool]) -> ToolResult:
    """Run one tool call and return its result; never raises for anything the tool or model did.

    Unknown tool, argument text that is not a JSON object, arguments that do not fit the
    schema, a tool that raised, and a tool past its timeout each give a ``ToolResult`` with
    ``is_error=True`` that says what went wrong and what was expected.
    """

    def error(text: str) -> ToolResult:
        return ToolResult(tool_call.tool_call_id, tool_call.name, text, is_error=True)

    tool_set = as_tool_set(tool_set)
    found = tool_set.get(tool_call.name)
    if found is None:
        known = ", ".join(sorted(tool_set)) or "(none)"
        return error(f"unknown tool {tool_call.name!r}; known tools: {known}")
    if tool_call.raw_arguments is not None:
        return error(
            f"arguments for tool {found.name!r} are not a JSON object: {quote(tool_call.raw_arguments)}; "
            f"expected a JSON object matching {json.dumps(found.parameters)}"
        )
    problem = find_schema_error(tool_call.arguments, found.parameters)
    if problem:
        return error(f"invalid arguments for tool {found.name!r}: {problem}")
    try:
        value = run_with_timeout(found, prepare_arguments(found, tool_call.arguments))
    except ToolOverran:
        return error(f"tool {found.name!r} did not finish within {found.timeout:g} s")
    except Exception as exc:  # the tool boundary: whatever a tool raises goes to the model
        return error(f"tool {found.name!r} raised {type(exc).__name__}: {exc}")
    return ToolResult(tool_call.tool_call_id, tool_call.name, truncate(result_text(value)))


class ToolOverran(Exception):
    """A tool ran past its ``timeout``."""


def run_with_timeout(found: Tool, arguments: dict) -> Any:
    """Call the tool; with a timeout, in a daemon thread that is abandoned if it overruns.

    Python cannot kill a thread: an overrunning tool keeps running in the background, but as
    a daemon it never keeps the process from exiting. Raises ``ToolOverran``, or what the tool raised.
    """
    if found.timeout is None:
        return found.function(**arguments)
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = found.function(**arguments)
        except BaseException as exc:  # handed to the caller's thread below
            outcome["error"] = exc

    worker = threading.Thread(target=run, name=f"tool {found.name}", daemon=True)
    worker.start()
    worker.join(found.timeout)
    if worker.is_alive():
        raise ToolOverran()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def prepare_arguments(found: Tool, arguments: dict) -> dict:
    """Turn validated JSON values into the Python values the function's hints ask for (Enums)."""
    hints = typing.get_type_hints(found.function) if inspect.isfunction(found.function) else {}
    return {key: as_hinted(value, hints.get(key)) for key, value in arguments.items()}


def as_hinted(value: Any, hint: Any) -> Any:
    """Return a JSON value as the hint asks: Enum members, also inside lists, dicts and ``| None``."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if value is None:
        return None
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint(value)
    if origin in (Union, types.UnionType):
        options = [arg for arg in args if arg is not type(None)]
        return as_hinted(value, options[0]) if len(options) == 1 else value
    if origin is list and args and isinstance(value, list):
        return [as_hinted(item, args[0]) for item in value]
    if origin is dict and len(args) == 2 and isinstance(value, dict):
        return {key: as_hinted(item, args[1]) for key, item in value.items()}
    return value


def result_text(value: Any) -> str:
    """Return a tool's return value as text: a str as it is, anything else as JSON (or its repr,
    for a value JSON cannot hold: tuple keys, a list that holds itself)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except Exception:  # tuple keys, a list that holds itself, a __str__ that raises
        try:
            return repr(value)
        except Exception:  # nested too deep even for repr, or a __repr__ that raises
            return f"<a {type(value).__name__} that cannot be shown as text>"


def truncate(text: str, limit: int = MAX_OUTPUT_CHARS) -> str:
    """Cut text longer than ``limit``, saying so and giving the original length."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[output truncated: showing {limit} of {len(text)} characters]"


def quote(text: str, limit: int = QUOTE_CHARS) -> str:
    """Quote text for an error message, cut to ``limit`` characters."""
    if len(text) > limit:
        return json.dumps(text[:limit]) + f" (truncated, {len(text)} characters)"
    return json.dumps(text)


# --- a small JSON-schema check: the subset that @tool produces ---------------------------

_JSON_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),  # 2.0 is refused: the function wants an int
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}


def find_schema_error(value: Any, schema: dict, path: str = "") -> str | None:
    """Return the first way ``value`` breaks ``schema`` as a sentence, or ``None`` if it fits.

    Checks ``type``, ``enum``, ``anyOf``, ``properties``, ``required``,
    ``additionalProperties`` and ``items``; other keywords are accepted without checking.
    """
    where = f"argument {path!r}" if path else "arguments"
    if "anyOf" in schema:
        if all(find_schema_error(value, option, path) for option in schema["anyOf"]):
            expected = " or ".join(describe(option) for option in schema["anyOf"])
            return f"{where}: expected {expected}, got {describe_value(value)}"
        return None
    expected_type = schema.get("type")
    type_names = expected_type if isinstance(expected_type, list) else [expected_type] if expected_type else []
    if type_names and not any(_JSON_TYPES.get(name, lambda v: True)(value) for name in type_names):
        return f"{where}: expected {describe(schema)}, got {describe_value(value)}"
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(json.dumps(option) for option in schema["enum"])
        return f"{where}: expected one of {allowed}, got {describe_value(value)}"
    if isinstance(value, dict):
        return find_object_error(value, schema, path)
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            problem = find_schema_error(item, schema["items"], f"{path}[{index}]")
            if problem:
                return problem
    return None


def find_object_error(value: dict, schema: dict, path: str) -> str | None:
    """The object part of ``find_schema_error``: required, known and extra keys."""
    properties = schema.get("properties", {})
    prefix = f"{path}." if path else ""
    for key in schema.get("required", []):
        if key not in value:
            return f"missing required argument {prefix + key!r} ({describe(properties.get(key, {}))})"
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        if key in properties:
            problem = find_schema_error(item, properties[key], prefix + key)
        elif extra is False:
            known = ", ".join(properties) or "(none)"
            return f"unknown argument {prefix + key!r}; expected arguments: {known}"
        elif isinstance(extra, dict):
            problem = find_schema_error(item, extra, prefix + key)
        else:
            problem = None
        if problem:
            return problem
    return None


def describe(schema: dict) -> str:
    """Say in words what a schema expects: ``integer``, ``one of "a", "b"``, ``array of string``."""
    if "enum" in schema:
        return "one of " + ", ".join(json.dumps(option) for option in schema["enum"])
    if "anyOf" in schema:
        return " or ".join(describe(option) for option in schema["anyOf"])
    kind = schema.get("type", "any value")
    if isinstance(kind, list):
        return " or ".join(kind)
    if kind == "array" and "items" in schema:
        return f"array of {describe(schema['items'])}"
    return kind


def describe_value(value: Any) -> str:
    """Name a JSON value's type and quote it briefly: ``string 'two'``."""
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _JSON_TYPES[name](value):
            shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
            return f"{name} {shown}"
    return type(value).__name__
