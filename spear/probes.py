"""The cookbook's three endpoint probes (seed 001, step 4): their requests and their judges.

In order: the model list names the served model; a plain completion stops on its own with text
(and, per seed 000 §6.2.10, no tool call); the cookbook's read_file request comes back as a tool
call that the fail-closed gate (spear/tool_calls.py) admits. Pure: the caller sends each request
(adding an API key header when the endpoint has one) and hands the answer to the probe's judge.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from spear import tool_calls
from spear.tool_calls import ToolSpec

MODEL_LIST = "model-list"
COMPLETION = "completion"
TOOL_CALL = "tool-call"

OK = tool_calls.OK
# Why a probe failed, besides the tool-call gate's own reasons.
HTTP_ERROR = "http-error"
NOT_JSON = "not-json"
BAD_MODEL_LIST = "bad-model-list"
MODEL_NOT_LISTED = "model-not-listed"
NO_CHOICES = tool_calls.NO_CHOICES
NOT_STOPPED = "not-stopped"
EMPTY_TEXT = "empty-text"
UNEXPECTED_TOOL_CALL = "unexpected-tool-call"
# Seed 001 "Failure modes": the model has no thinking mode, so a <think> block in an answer means
# the wrong checkpoint or chat template (and no reasoning parser is there to hide it).
THINKING_OUTPUT = "thinking-output"
THINK_TAG = "<think>"

COMPLETION_PROMPT = "Write a Python one-liner that reverses a string."
TOOL_CALL_PROMPT = "Read src/app.py and summarise it."
# What the gate admits: the cookbook's registry (read_file is the tool the request offers).
TOOL_REGISTRY = {
    "read_file": ToolSpec(required={"path": str}, optional={"max_bytes": int}),
    "run_tests": ToolSpec(required={"target": str}),
}
READ_FILE_TOOL = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file from the repository",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                       "required": ["path"]},
    },
}
# A shown body is cut here, so a failure message stays readable.
DETAIL_CHARS = 300


@dataclass(frozen=True)
class ProbeResult:
    name: str
    passed: bool
    reason: str  # OK or why not
    detail: str  # what was seen, for the person reading the failure


@dataclass(frozen=True)
class Probe:
    name: str
    method: str
    path: str
    body: dict[str, Any] | None  # sent as JSON; None: no body
    judge: Callable[[int, bytes], ProbeResult]  # (HTTP status, response body) -> result

    def encoded_body(self) -> bytes:
        return b"" if self.body is None else json.dumps(self.body).encode()


def failure(endpoint: str, result: ProbeResult) -> str:
    """What a failed probe says: the endpoint, the probe, the reason and what was seen."""
    return f"endpoint {endpoint}: {result.name} probe failed: {result.reason} ({result.detail})"


def _shown(body: bytes) -> str:
    text = body.decode(errors="replace")
    return text if len(text) <= DETAIL_CHARS else text[:DETAIL_CHARS] + "..."


def _parse(name: str, status: int, body: bytes) -> dict[str, Any] | ProbeResult:
    """The answer as a JSON object, or the failed result saying why it is not one."""
    if status != 200:
        return ProbeResult(name, False, HTTP_ERROR, f"HTTP {status}: {_shown(body)}")
    try:
        answer = json.loads(body)
    except ValueError:
        return ProbeResult(name, False, NOT_JSON, _shown(body))
    if not isinstance(answer, dict):
        return ProbeResult(name, False, NOT_JSON, f"not a JSON object: {_shown(body)}")
    return answer


def listed_models(answer: dict[str, Any]) -> list[str] | None:
    """The model ids of a /v1/models answer, or None when it is not an OpenAI model list."""
    data = answer.get("data")
    if not isinstance(data, list) or not all(isinstance(m, dict) for m in data):
        return None
    ids = [m.get("id") for m in data]
    return ids if all(isinstance(i, str) for i in ids) else None


def judge_model_list(served_model: str, status: int, body: bytes) -> ProbeResult:
    answer = _parse(MODEL_LIST, status, body)
    if isinstance(answer, ProbeResult):
        return answer
    ids = listed_models(answer)
    if ids is None:
        return ProbeResult(MODEL_LIST, False, BAD_MODEL_LIST, _shown(body))
    if served_model not in ids:
        return ProbeResult(MODEL_LIST, False, MODEL_NOT_LISTED,
                           f"{served_model!r} is not among {ids}")
    return ProbeResult(MODEL_LIST, True, OK, f"lists {ids}")


def judge_completion(status: int, body: bytes) -> ProbeResult:
    answer = _parse(COMPLETION, status, body)
    if isinstance(answer, ProbeResult):
        return answer
    choices = answer.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return ProbeResult(COMPLETION, False, NO_CHOICES, _shown(body))
    choice = choices[0]
    message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
    text = message.get("content")
    finish = choice.get("finish_reason")
    if message.get("tool_calls"):
        # A plain question answered with a tool call breaks the end_turn contract.
        return ProbeResult(COMPLETION, False, UNEXPECTED_TOOL_CALL, _shown(body))
    if finish != "stop":
        return ProbeResult(COMPLETION, False, NOT_STOPPED, f"finish_reason {finish!r}: {_shown(body)}")
    if not isinstance(text, str) or not text.strip():
        return ProbeResult(COMPLETION, False, EMPTY_TEXT, _shown(body))
    if THINK_TAG in text or message.get("reasoning_content"):
        return ProbeResult(COMPLETION, False, THINKING_OUTPUT, _shown(body))
    return ProbeResult(COMPLETION, True, OK, f"stop, {len(text)} characters")


def judge_tool_call(status: int, body: bytes) -> ProbeResult:
    answer = _parse(TOOL_CALL, status, body)
    if isinstance(answer, ProbeResult):
        return answer
    verdict = tool_calls.validate(answer, TOOL_REGISTRY)
    if not verdict.ok:
        return ProbeResult(TOOL_CALL, False, verdict.reason, _shown(body))
    return ProbeResult(TOOL_CALL, True, OK,
                       "; ".join(f"{c.name}({json.dumps(c.arguments)})" for c in verdict.calls))


def probes(served_model: str) -> tuple[Probe, ...]:
    """The three probes, in the order they run, for an endpoint serving `served_model`."""
    return (
        Probe(MODEL_LIST, "GET", "/v1/models", None,
              lambda status, body: judge_model_list(served_model, status, body)),
        Probe(COMPLETION, "POST", "/v1/chat/completions", {
            "model": served_model,
            "messages": [{"role": "user", "content": COMPLETION_PROMPT}],
            "max_tokens": 128,
        }, judge_completion),
        Probe(TOOL_CALL, "POST", "/v1/chat/completions", {
            "model": served_model,
            "messages": [{"role": "user", "content": TOOL_CALL_PROMPT}],
            "tools": [READ_FILE_TOOL],
            "tool_choice": "auto",
            "max_tokens": 256,
        }, judge_tool_call),
    )

