"""The tool-call gate (spear/tool_calls.py): every assertion of the cookbook's `tool_call_gate.py`
(seed 001, step 4) as its own test, in its order, then the cases it leaves out."""

from __future__ import annotations

from typing import Any

import pytest

from spear import tool_calls
from spear.tool_calls import Call, ToolSpec, Verdict, validate

# The cookbook's registry.
TOOLS = {
    "read_file": ToolSpec(required={"path": str}, optional={"max_bytes": int}),
    "run_tests": ToolSpec(required={"target": str}),
}
WRONG_PARSER_TEXT = '<tool_call>\n{"name": "read_file", "arguments": {"path": "src/app.py"}}\n</tool_call>'


def resp(calls: list | None = None, content: str | None = None, finish: str = "tool_calls") -> dict:
    """A minimal OpenAI-style chat completion."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls is not None:
        message["tool_calls"] = calls
    return {"choices": [{"message": message, "finish_reason": finish}]}


def fncall(name: Any, args: Any, id: Any = "call_1", type: str = "function") -> dict:
    return {"id": id, "type": type, "function": {"name": name, "arguments": args}}


def reason(response: Any) -> str:
    return validate(response, TOOLS).reason


# --- The cookbook's assertions.

def test_a_well_formed_call_passes_with_its_arguments_parsed():
    ok, why, calls = validate(resp([fncall("read_file", '{"path": "src/app.py"}')]), TOOLS)
    assert ok and why == "ok" and calls == (("read_file", {"path": "src/app.py"}),)


def test_tool_call_markup_left_in_content_is_the_parser_trap():
    wrong_parser = resp(content=WRONG_PARSER_TEXT, finish="stop")
    assert validate(wrong_parser, TOOLS) == (False, "parser-not-configured", ())


def test_a_plain_refusal_is_no_tool_call_not_the_parser_trap():
    assert reason(resp(content="I cannot run tools.", finish="stop")) == "no-tool-call"


def test_a_hallucinated_tool_is_unknown():
    assert reason(resp([fncall("delete_repo", '{"path": "/"}')])) == "unknown-tool"


def test_truncated_argument_json_is_malformed():
    assert reason(resp([fncall("read_file", '{"path": "src/a')])) == "malformed-arguments"


def test_arguments_that_are_json_but_not_an_object_are_malformed():
    assert reason(resp([fncall("read_file", '["src/app.py"]')])) == "malformed-arguments"


def test_missing_arguments_are_malformed():
    assert reason(resp([fncall("read_file", None)])) == "malformed-arguments"


def test_a_missing_required_argument_is_refused():
    assert reason(resp([fncall("read_file", "{}")])) == "missing-argument"


def test_an_argument_the_tool_does_not_take_is_refused():
    assert reason(resp([fncall("read_file", '{"path": "a", "mode": "w"}')])) == "unexpected-argument"


def test_an_argument_of_the_wrong_type_is_refused():
    assert reason(resp([fncall("read_file", '{"path": 7}')])) == "wrong-type"


def test_a_boolean_is_not_an_integer():
    assert reason(resp([fncall("read_file", '{"path": "a", "max_bytes": true}')])) == "wrong-type"


def test_an_optional_argument_of_the_right_type_passes():
    assert validate(resp([fncall("read_file", '{"path": "a", "max_bytes": 4096}')]), TOOLS).ok


def test_one_bad_call_refuses_the_whole_batch_and_admits_no_call():
    mixed = resp([fncall("read_file", '{"path": "a"}'),
                  fncall("nuke_prod", '{"target": "db"}', id="call_2")])
    assert validate(mixed, TOOLS) == (False, "unknown-tool", ())


def test_calls_cut_by_the_length_limit_are_refused_even_when_their_json_parses():
    assert reason(resp([fncall("read_file", '{"path": "a"}')], finish="length")) == "truncated-or-mixed"


def test_an_empty_response_has_no_choices():
    assert validate({}, TOOLS) == (False, "no-choices", ())


def test_an_empty_choice_list_has_no_choices():
    assert validate({"choices": []}, TOOLS) == (False, "no-choices", ())


def test_an_empty_tool_call_list_is_no_tool_call():
    assert reason(resp([])) == "no-tool-call"


def test_a_call_without_an_id_is_badly_shaped():
    call = {"type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    assert reason(resp([call])) == "bad-call-shape"


def test_a_call_that_is_not_a_function_call_is_badly_shaped():
    assert reason(resp([fncall("read_file", '{"path": "a"}', type="tool")])) == "bad-call-shape"


def test_no_response_at_all_has_no_choices():
    assert validate(None, TOOLS) == (False, "no-choices", ())


def test_more_than_one_choice_is_refused():
    assert validate({"choices": [{}, {}]}, TOOLS) == (False, "multiple-choices", ())


def test_tool_calls_that_are_not_a_list_are_badly_shaped():
    assert reason({"choices": [{"message": {"tool_calls": "not-a-list"}}]}) == "bad-call-shape"


def test_a_tool_name_that_is_not_a_string_is_unknown():
    assert reason(resp([fncall(["read_file"], "{}")])) == "unknown-tool"


# --- What the cookbook's assertions leave out.

def test_the_reason_constants_are_the_cookbooks_names():
    names = {value for key, value in vars(tool_calls).items() if key.isupper() and isinstance(value, str)
             and key not in ("OK", "TOOL_CALL_MARKUP")}
    assert names == {"parser-not-configured", "no-tool-call", "unknown-tool", "malformed-arguments",
                     "missing-argument", "unexpected-argument", "wrong-type", "truncated-or-mixed",
                     "bad-call-shape", "no-choices", "multiple-choices", "bad-choice-shape",
                     "bad-message-shape"}


def test_a_choice_that_is_not_an_object_is_badly_shaped():
    assert reason({"choices": ["text"]}) == "bad-choice-shape"


def test_a_message_that_is_not_an_object_is_badly_shaped():
    assert reason({"choices": [{"message": "text", "finish_reason": "stop"}]}) == "bad-message-shape"


def test_a_call_whose_function_is_not_an_object_is_badly_shaped():
    call = {"id": "call_1", "type": "function", "function": "read_file"}
    assert reason(resp([call])) == "bad-call-shape"


def test_a_call_with_an_empty_id_is_badly_shaped():
    assert reason(resp([fncall("read_file", '{"path": "a"}', id="")])) == "bad-call-shape"


def test_two_calls_with_one_id_are_badly_shaped():
    twins = resp([fncall("read_file", '{"path": "a"}'), fncall("run_tests", '{"target": "t"}')])
    assert reason(twins) == "bad-call-shape"


def test_a_good_batch_comes_back_whole_and_in_order():
    batch = resp([fncall("read_file", '{"path": "a"}'),
                  fncall("run_tests", '{"target": "unit"}', id="call_2")])
    assert validate(batch, TOOLS) == Verdict(True, "ok", (Call("read_file", {"path": "a"}),
                                                          Call("run_tests", {"target": "unit"})))


def test_calls_that_end_the_turn_as_plain_text_are_refused():
    # Seed 6.2.10: calls present but end_turn is an error, and no call is exposed.
    assert validate(resp([fncall("read_file", '{"path": "a"}')], finish="stop"), TOOLS) == (
        False, "truncated-or-mixed", ())


def test_calls_next_to_leftover_markup_are_a_partly_extracted_batch():
    partial = resp([fncall("read_file", '{"path": "a"}')], content=WRONG_PARSER_TEXT)
    assert reason(partial) == "truncated-or-mixed"


def test_a_tool_calls_finish_without_calls_is_no_tool_call():
    assert reason(resp(content="", finish="tool_calls")) == "no-tool-call"


def test_arguments_already_parsed_into_an_object_are_malformed():
    # The contract is a JSON string; a server that sends an object is not OpenAI-compatible.
    assert reason(resp([fncall("read_file", {"path": "a"})])) == "malformed-arguments"


def test_a_repeated_argument_is_malformed():
    # json.loads would keep the second path: the checked call and the executed one would differ.
    assert reason(resp([fncall("read_file", '{"path": "a", "path": "/etc/shadow"}')])) == (
        "malformed-arguments")


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_number_constants_outside_json_are_malformed(constant):
    assert reason(resp([fncall("run_tests", f'{{"target": "t", "n": {constant}}}')])) == (
        "malformed-arguments")


def test_arguments_nested_too_deep_to_parse_are_malformed_not_a_crash():
    assert reason(resp([fncall("read_file", "[" * 100_000)])) == "malformed-arguments"


def test_a_whole_number_is_a_valid_float_but_a_boolean_is_not():
    tools = {"sleep": ToolSpec(required={"seconds": float})}
    assert validate(resp([fncall("sleep", '{"seconds": 2}')]), tools).ok
    assert validate(resp([fncall("sleep", '{"seconds": 2.5}')]), tools).ok
    assert validate(resp([fncall("sleep", '{"seconds": false}')]), tools).reason == "wrong-type"


def test_a_refusal_never_carries_calls():
    refusals = [resp([fncall("read_file", '{"path": "a"}')], finish="length"),
                resp(content=WRONG_PARSER_TEXT, finish="stop"), {"choices": [1]}]
    assert all(validate(r, TOOLS).calls == () for r in refusals)


def test_a_registry_refuses_an_argument_both_required_and_optional():
    with pytest.raises(ValueError, match="both required and optional"):
        ToolSpec(required={"path": str}, optional={"path": str})


def test_a_registry_refuses_a_type_json_cannot_give():
    with pytest.raises(ValueError, match="JSON cannot give"):
        ToolSpec(required={"when": tuple})
