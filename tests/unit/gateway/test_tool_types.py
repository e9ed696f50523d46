"""A Responses `coder` request keeps only its function tools (spear_gateway/tool_types.py): the
fleet's server refused every Codex turn for its `namespace` tool."""

from spear_gateway.tool_types import is_responses, keep_function_tools

SHELL = {"type": "function", "name": "shell", "parameters": {"type": "object"}}
NAMESPACE = {"type": "namespace", "name": "multi_agent_v1", "tools": [SHELL]}


def test_a_namespace_and_a_built_in_tool_are_dropped_and_the_functions_kept_in_order():
    patch = {"type": "function", "name": "apply_patch", "parameters": {"type": "object"}}
    request = {"model": "coder", "input": [], "tool_choice": "auto",
               "tools": [SHELL, NAMESPACE, {"type": "web_search"}, patch]}
    assert keep_function_tools(request) == ["namespace:multi_agent_v1", "web_search:"]
    assert request == {"model": "coder", "input": [], "tool_choice": "auto", "tools": [SHELL, patch]}


def test_a_request_left_with_no_tool_loses_its_tool_choice_too():
    request = {"input": [], "tools": [NAMESPACE], "tool_choice": "required"}
    assert keep_function_tools(request) == ["namespace:multi_agent_v1"]
    assert request == {"input": []}


def test_a_request_without_tools_is_left_as_it_is():
    request = {"input": []}
    assert keep_function_tools(request) == [] and request == {"input": []}


def test_only_litellms_responses_call_types_count_as_responses():
    class CallType:  # LiteLLM's CallTypes is a str Enum: its value names the route
        value = "aresponses"
    assert is_responses("aresponses") and is_responses("responses") and is_responses(CallType())
    assert not any(is_responses(t) for t in ("acompletion", "anthropic_messages", None))
