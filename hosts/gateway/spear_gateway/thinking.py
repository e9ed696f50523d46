"""What a `coder` request asks of thinking, taken out before routing (seed 001: the model "supports
only non-thinking mode"; no reasoning parser papers over a thinking checkpoint either).

Harnesses ask for it unasked: Codex's Responses `reasoning`, OpenHands' `reasoning_effort`,
Claude Code's `thinking` and `output_config.effort`. LiteLLM turns each into `reasoning_effort`
and refuses that for the fleet's OpenAI-compatible model (HTTP 400 UnsupportedParamsError), so
every turn of those harnesses failed. The model answers such a request exactly as any other,
so the ask is dropped rather than refused. Only these fields: LiteLLM's `drop_params` would drop
every parameter it does not know the model to take, silently, whatever the developer meant.
Pure: litellm_hooks.py calls it on the proxy's request body.
"""

from __future__ import annotations

from typing import Any

# Chat completions, Responses, Anthropic Messages.
THINKING_FIELDS = ("reasoning_effort", "reasoning", "thinking")


def drop_thinking(request: dict[str, Any]) -> None:
    """Remove the thinking asks from a request, at its top level and in `extra_body`, and the
    effort from Messages' `output_config` (the rest of it, e.g. a format, stays)."""
    for body in (request, request.get("extra_body")):
        if isinstance(body, dict):
            for name in THINKING_FIELDS:
                body.pop(name, None)
    config = request.get("output_config")
    if isinstance(config, dict):
        config.pop("effort", None)
        if not config:
            del request["output_config"]
