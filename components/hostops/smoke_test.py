"""The smoke test (seed 6.2.11; its request and judge in spear/smoke.py) as a deploy check:
anything but `end_turn | SPEAR-BACKEND-OK | ()` fails the update, showing all three parts. It runs again whenever
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

from components.hostops.host_resource import CheckProvider, HostResource
from components.hostops.kube_api import vantage, vantage_name
from components.hostops.ssh import RemoteError, bearer_headers
from review.kinds import IN_PLACE, Change, Kind, changed_keys, changed_lines, updates_only
from spear import tokens
from spear.smoke import EXPECTED_TEXT, judge, request_body

# Who answered: LiteLLM's deployment id, and the serving pod's name as LiteLLM passes on the
# provider's headers (the local serving image sets x-spear-standin-pod).
ROUTE_HEADER = "x-litellm-model-id"
POD_HEADERS = ("llm_provider-x-spear-standin-pod", "x-spear-standin-pod")
TRIES_PER_ROUTE = 10


@dataclass
class SmokeTestArgs:
    connection: pulumi.Input[dict] | None  # where the request starts: a host,
    port: int
    address: str = "127.0.0.1"
    model: pulumi.Input[str] = "spear"
    api_key: pulumi.Input[str] | None = None  # a secret, for a server that demands one
    # Re-run whenever one of these changes (e.g. the service's start time).
    triggers: dict[str, pulumi.Input[Any]] | None = None
    routes: list[str] | None = None  # through the gateway: every route that must answer
    cluster: pulumi.Input[dict] | None = None  # or a Service's cluster (kube_api.vantage)


def served_by(headers: dict[str, str]) -> str:
    route = headers.get(ROUTE_HEADER, "")
    pod = next((headers[h] for h in POD_HEADERS if headers.get(h)), "")
    return f"{route} ({pod})" if route and pod else route or pod


class SmokeTestProvider(CheckProvider):
    update_fields = ("triggers", "port", "address", "model", "api_key", "routes")

    def resource_id(self, props: dict[str, Any]) -> str:
        return f"{vantage_name(props)}:{props['address']}:{props['port']}"

    def apply(self, props: dict[str, Any], olds: dict[str, Any] | None) -> dict[str, Any]:
        routes = list(props.get("routes") or [])
        seen: dict[str, str] = {}  # route -> who served it
        with vantage(props) as host:
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


@updates_only
def _smoke_details(change: Change) -> list[str]:
    if changed_keys(change.old.get("triggers") or {}, change.new.get("triggers") or {}):
        return ["runs again: what it checks restarts or is checked again"]
    return changed_lines(change.old, change.new)


KIND = Kind.of(tokens.SMOKE_TEST, "smoke test", IN_PLACE, details=_smoke_details,
               meanings={IN_PLACE: "asks the server for SPEAR-BACKEND-OK again"})

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
                **({"cluster": args.cluster} if args.cluster else {}),
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
