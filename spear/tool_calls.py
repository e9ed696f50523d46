"""The tool-call gate: judge an OpenAI-style chat completion's tool calls against a typed registry.

The contract is the cookbook's `tool_call_gate.py` (seed 001, step 4) and the stop_reason rules of
seed 000 §6.2.10: fail closed, one bad call rejects the whole response (a good call next to a bad
one is never handed out), truncation is judged by finish_reason rather than by whether the JSON
parses, and tool-call markup left as text in `content` is named `parser-not-configured`, the
wrong-parser failure that otherwise looks like success.

Pure and stdlib only: the endpoint probes, the policy pack and the rollout gate import it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

OK = "ok"
# Why a response is refused; the names are the cookbook's, so logs and runbooks agree.
PARSER_NOT_CONFIGURED = "parser-not-configured"
NO_TOOL_CALL = "no-tool-call"
UNKNOWN_TOOL = "unknown-tool"
MALFORMED_ARGUMENTS = "malformed-arguments"
MISSING_ARGUMENT = "missing-argument"
UNEXPECTED_ARGUMENT = "unexpected-argument"
WRONG_TYPE = "wrong-type"
TRUNCATED_OR_MIXED = "truncated-or-mixed"
BAD_CALL_SHAPE = "bad-call-shape"
NO_CHOICES = "no-choices"
MULTIPLE_CHOICES = "multiple-choices"
BAD_CHOICE_SHAPE = "bad-choice-shape"
BAD_MESSAGE_SHAPE = "bad-message-shape"

# The Hermes/Qwen tool-call opening tag: seen in `content`, the engine never extracted the call.
TOOL_CALL_MARKUP = "<tool_call>"
# What json.loads can give an argument; a registry may only ask for these.
JSON_TYPES = frozenset({str, int, float, bool, list, dict, type(None)})


@dataclass(frozen=True)
class ToolSpec:
    """One tool's arguments: name -> the exact JSON type it must have."""

    required: Mapping[str, type] = field(default_factory=dict)
    optional: Mapping[str, type] = field(default_factory=dict)

    def __post_init__(self) -> None:
        both = set(self.required) & set(self.optional)
        if both:
            raise ValueError(f"arguments both required and optional: {sorted(both)}")
        odd = {k: t for k, t in self.allowed.items() if t not in JSON_TYPES}
        if odd:
            raise ValueError(f"argument types that JSON cannot give: {odd}")

    @property
    def allowed(self) -> dict[str, type]:
        return {**self.required, **self.optional}


Registry = Mapping[str, ToolSpec]


class Call(NamedTuple):
    name: str
    arguments: dict[str, Any]


class Verdict(NamedTuple):
    ok: bool
    reason: str  # OK or one of the reasons above
    calls: tuple[Call, ...] = ()  # only when ok: nothing is admitted from a refused response


def _has_type(value: Any, expected: type) -> bool:
    # Exact types, because isinstance(True, int) is true and a boolean must not pass as a count.
    # JSON has one number type, so a whole number is a valid float argument (3 for 3.0).
    return type(value) is expected or (expected is float and type(value) is int)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json.loads keeps the last of repeated keys; a checker and an executor reading different
    # values of one argument is how a checked call does something else, so refuse repeats.
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("repeated key")
    return dict(pairs)


def _parse_arguments(raw: Any) -> dict[str, Any] | None:
    """A call's `arguments` (a JSON string holding an object) parsed, or None when it is not one."""
    if not isinstance(raw, str):
        return None
    try:
        args = json.loads(raw, object_pairs_hook=_unique_keys, parse_constant=_refuse_constant)
    # JSONDecodeError is a ValueError; absurdly deep nesting exhausts the parser's recursion.
    except (ValueError, RecursionError):
        return None
    return args if isinstance(args, dict) else None


def check_arguments(name: Any, raw: Any, tools: Registry) -> Verdict:
    """One call's name and raw arguments against the registry; the parsed call when they pass."""
    spec = tools.get(name) if isinstance(name, str) else None
    if spec is None:
        return Verdict(False, UNKNOWN_TOOL)
    args = _parse_arguments(raw)
    if args is None:
        return Verdict(False, MALFORMED_ARGUMENTS)
    allowed = spec.allowed
    if any(key not in allowed for key in args):
        return Verdict(False, UNEXPECTED_ARGUMENT)
    if any(key not in args for key in spec.required):
        return Verdict(False, MISSING_ARGUMENT)
    if any(not _has_type(value, allowed[key]) for key, value in args.items()):
        return Verdict(False, WRONG_TYPE)
    return Verdict(True, OK, (Call(name, args),))


def _call_shape_ok(call: Any) -> bool:
    return (isinstance(call, dict) and call.get("type") == "function"
            and isinstance(call.get("id"), str) and bool(call["id"])
            and isinstance(call.get("function"), dict))


def validate(response: Any, tools: Registry) -> Verdict:
    """A whole chat completion -> Verdict; any doubt refuses the response and admits no call."""
    choices = response.get("choices") if isinstance(response, dict) else None
    if not isinstance(choices, list) or not choices:
        return Verdict(False, NO_CHOICES)
    if len(choices) != 1:
        return Verdict(False, MULTIPLE_CHOICES)
    choice = choices[0]
    if not isinstance(choice, dict):
        return Verdict(False, BAD_CHOICE_SHAPE)
    message = choice.get("message") or {}
    if not isinstance(message, dict):
        return Verdict(False, BAD_MESSAGE_SHAPE)
    raw_calls = message.get("tool_calls")
    if raw_calls is None:
        raw_calls = []
    if not isinstance(raw_calls, list):
        return Verdict(False, BAD_CALL_SHAPE)
    content = message.get("content")
    markup_in_text = isinstance(content, str) and TOOL_CALL_MARKUP in content
    if not raw_calls:
        return Verdict(False, PARSER_NOT_CONFIGURED if markup_in_text else NO_TOOL_CALL)
    # Calls that did not end the turn as tool calls may be cut short (length) or not meant
    # (stop); calls next to leftover markup are a partly extracted batch. Neither is executed.
    if choice.get("finish_reason") != "tool_calls" or markup_in_text:
        return Verdict(False, TRUNCATED_OR_MIXED)
    calls: list[Call] = []
    ids: set[str] = set()
    for call in raw_calls:
        # Results go back to the model by call id, so a repeated id is as bad as a missing one.
        if not _call_shape_ok(call) or call["id"] in ids:
            return Verdict(False, BAD_CALL_SHAPE)
        ids.add(call["id"])
        verdict = check_arguments(call["function"].get("name"), call["function"].get("arguments"),
                                  tools)
        if not verdict.ok:
            return verdict
        calls.extend(verdict.calls)
    return Verdict(True, OK, tuple(calls))
