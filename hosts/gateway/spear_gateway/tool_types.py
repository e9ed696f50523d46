"""The tools of a Responses request that the fleet cannot be offered, taken out before routing.

Codex 0.169 offers, beside its function tools, a `namespace` tool (its multi-agent tools), and the
Responses API has built-in kinds (`web_search`, `custom`, ...). LiteLLM's Responses bridge hands
every tool to chat completions as it came, and the fleet's server refuses the whole request for
one it does not know: llama-server answered 500 "Unsupported tool type: namespace" to every Codex
turn (measured in a seat), and vLLM's chat completions take function tools only. So a `coder`
request through /v1/responses keeps its function tools and loses the rest; the model could not
have called the others. Chat completions and Messages are left alone (their tools are functions,
or Anthropic's, which LiteLLM maps itself).
Pure: litellm_hooks.py calls it on the proxy's request body.
"""

from __future__ import annotations

from typing import Any

RESPONSES_CALL_TYPES = ("responses", "aresponses")  # LiteLLM's CallTypes values for /v1/responses


def is_responses(call_type: Any) -> bool:
    return str(getattr(call_type, "value", call_type)) in RESPONSES_CALL_TYPES


def keep_function_tools(request: dict[str, Any]) -> list[str]:
    """Drop every tool that is not a function from a Responses request; returns the dropped
    tools' types (and names), for the log."""
    tools = request.get("tools")
    if not isinstance(tools, list):
        return []
    kept = [tool for tool in tools if isinstance(tool, dict) and tool.get("type") == "function"]
    dropped = [f"{tool.get('type')}:{tool.get('name', '')}" if isinstance(tool, dict) else repr(tool)
               for tool in tools if tool not in kept]
    if kept:
        request["tools"] = kept
    else:
        del request["tools"]
        request.pop("tool_choice", None)  # a choice among no tools is refused
    return dropped
