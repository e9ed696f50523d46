"""The smoke test (seed 6.2.11) as a deploy check.

One chat completion asks for exactly `SPEAR-BACKEND-OK`; a healthy server and backend contract
answer with three parts: stop reason end_turn (finish_reason "stop"), exactly that text, and no
tool calls. Anything else fails the update, showing all three parts. It runs again whenever
the service it checks was restarted.

Through the gateway (`routes` given) it asks until every route the key reaches has answered
(LiteLLM picks a deployment per request) and records who served: the route (LiteLLM's
`x-litellm-model-id`) and, where the server names itself, its pod.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi.dynamic import ReadResult

from components.hostops.host_resource import HostProvider, HostResource
from components.hostops.ssh import RemoteError, Session, bearer_headers
from spear import tokens
from spear.rules import SMOKE_ANSWER

EXPECTED_TEXT = SMOKE_ANSWER
SYSTEM_PROMPT = "Reply with exactly the token requested, nothing else."
USER_PROMPT = f"Reply with exactly: {EXPECTED_TEXT}"

# Who answered: LiteLLM's deployment id, and the serving pod's name as LiteLLM passes on the
# provider's headers (the local serving image sets x-spear-standin-pod).
ROUTE_HEADER = "x-litellm-model-id"
POD_HEADERS = ("llm_provider-x-spear-standin-pod", "x-spear-standin-pod")
TRIES_PER_ROUTE = 10

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


def request_body(model: str) -> bytes:
    return json.dumps({
        "model": model,
        "messages": [{"role": "system", "content": SYSTEM_PROMPT},
                     {"role": "user", "content": USER_PROMPT}],
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


@dataclass
class SmokeTestArgs:
    connection: pulumi.Input[dict]
    port: int
    address: str = "127.0.0.1"
    model: pulumi.Input[str] = "spear"
    api_key: pulumi.Input[str] | None = None  # a secret, for a server that demands one
    # Re-run whenever one of these changes (e.g. the service's start time).
    triggers: dict[str, pulumi.Input[Any]] | None = None
    routes: list[str] | None = None  # through the gateway: every route that must answer


def served_by(headers: dict[str, str]) -> str:
    route = headers.get(ROUTE_HEADER, "")
    pod = next((headers[h] for h in POD_HEADERS if headers.get(h)), "")
    return f"{route} ({pod})" if route and pod else route or pod


class SmokeTestProvider(HostProvider):
    update_fields = ("triggers", "port", "address", "model", "api_key", "routes")

    def resource_id(self, props: dict[str, Any]) -> str:
        return f"{props['connection']['host']}:{props['address']}:{props['port']}"

    def apply(self, props: dict[str, Any], olds: dict[str, Any] | None) -> dict[str, Any]:
        routes = list(props.get("routes") or [])
        seen: dict[str, str] = {}  # route -> who served it
        with Session(props["connection"]) as host:
            for _ in range(max(1, TRIES_PER_ROUTE * len(routes))):
                status, headers, body = host.http_exchange(
                    int(props["port"]), "POST", "/v1/chat/completions", request_body(props["model"]),
                    address=props["address"], timeout=300, headers=bearer_headers(props.get("api_key")))
                if status != 200:
                    raise RemoteError(f"smoke test: HTTP {status} from the server: {body[:500]!r}")
                result = judge(json.loads(body))
                if not result.passed:
                    raise RemoteError(f"smoke test failed: got `{result}`, expected"
                                      f" `end_turn | {EXPECTED_TEXT} | ()` ({served_by(headers)})")
                seen.setdefault(headers.get(ROUTE_HEADER, ""), served_by(headers))
                if set(routes) <= set(seen):
                    break
        if unexpected := sorted(set(seen) - set(routes)) if routes else []:
            raise RemoteError(f"smoke test: answered by {', '.join(unexpected)}, which this key must"
                              f" not reach (it reaches {', '.join(routes)})")
        if missing := sorted(set(routes) - set(seen)):
            raise RemoteError(f"smoke test: {', '.join(missing)} never answered in"
                              f" {TRIES_PER_ROUTE * len(routes)} requests (served: {', '.join(seen)})")
        return {**props, "stop_reason": result.stop_reason, "text": result.text,
                "tool_calls": list(result.tool_calls), "summary": str(result),
                "served_by": sorted(seen.values())}

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return ReadResult(id_=id_, outs=dict(props))  # a check leaves nothing on the host

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        return None


class SmokeTest(HostResource, module=tokens.DYNAMIC_MODULE, name=tokens.SMOKE_TEST.name):
    stop_reason: pulumi.Output[str]
    text: pulumi.Output[str]
    tool_calls: pulumi.Output[list]
    summary: pulumi.Output[str]
    served_by: pulumi.Output[list]

    def __init__(self, name: str, args: SmokeTestArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(
            SmokeTestProvider(),
            name,
            {
                "connection": args.connection,
                "port": args.port,
                "address": args.address,
                "model": args.model,
                "api_key": args.api_key,
                "triggers": args.triggers or {},
                **({"routes": args.routes} if args.routes else {}),
            },
            opts,
            outputs=("stop_reason", "text", "tool_calls", "summary", "served_by"),
            secret_inputs=("api_key",),
        )
