"""The seed's smoke test (seed 6.2.11), pure: its request and its judge.

One chat completion asks for exactly `SPEAR-BACKEND-OK`; a healthy server and backend contract
answer with three parts: stop reason end_turn (finish_reason "stop"), exactly that text, and no
tool calls. Stdlib only: the deploy check (components/hostops/smoke_test.py) and the gateway's
pods (hosts/gateway/spear_gateway/prove.py) judge with it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from spear.rules import SMOKE_ANSWER

EXPECTED_TEXT = SMOKE_ANSWER
SYSTEM_PROMPT = "Reply with exactly the token requested, nothing else."
USER_PROMPT = f"Reply with exactly: {EXPECTED_TEXT}"

# OpenAI finish_reason -> the harness's stop reason (seed 6.2.7, 6.2.10).
_STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens",
                 "content_filter": "refusal"}


@dataclass(frozen=True)
class SmokeResult:
    stop_reason: str
    text: str
    tool_calls: tuple[str, ...]

    @property
    def passed(self) -> bool:
        return self.stop_reason == "end_turn" and self.text == EXPECTED_TEXT and not self.tool_calls

    def __str__(self) -> str:
        calls = "(" + ", ".join(self.tool_calls) + ("," if len(self.tool_calls) == 1 else "") + ")"
        return f"{self.stop_reason} | {self.text} | {calls}"


# Plenty for the answer, and a bound on what the check holds of a developer's budget (without
# one the gateway holds the default limit's worth).
MAX_TOKENS = 64


def request_body(model: str) -> bytes:
    return json.dumps({
        "model": model,
        "messages": [{"role": "system", "content": SYSTEM_PROMPT},
                     {"role": "user", "content": USER_PROMPT}],
        "max_tokens": MAX_TOKENS,
        "stream": False,
    }).encode()


def judge(response: dict[str, Any]) -> SmokeResult:
    """The three parts of an OpenAI-compatible chat completion."""
    choice = (response.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    finish = choice.get("finish_reason")
    return SmokeResult(
        stop_reason=_STOP_REASONS.get(finish, "other" if finish else "error"),
        text=(message.get("content") or "").strip(),
        tool_calls=tuple(call.get("function", {}).get("name", "?")
                         for call in message.get("tool_calls") or ()),
    )
