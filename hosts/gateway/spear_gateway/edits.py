"""Diff acceptance (seed 001's observability table): the edit decisions harnesses report, counted
per developer on the gateway's /metrics as `spear_edit_decisions_total{developer,team,harness,
tool,decision,source}`.

Claude Code reports every permission decision on an edit (Edit, Write, NotebookEdit) as the
OpenTelemetry counter `claude_code.code_edit_tool.decision` {decision: accept|reject, source:
config|user_temporary|user_permanent|user_reject|..., tool_name}. Its wiring (spear/harness.py)
sends its metrics here, OTLP over HTTP with JSON, on the gateway's own port and with the
developer's own key as the bearer token, so the decision is counted against the key's owner
(its metadata, as the budget exporter names them) and no collector is needed beside the
gateway. Measured on Claude Code 2.1.328: a turn with `--permission-mode acceptEdits` reports
`accept` from `config`, one without it in `-p` mode `reject` from `config`, both as delta sums.

Why a route of our own on LiteLLM's app: LiteLLM has no OTLP receiver, its pass-through
endpoints authenticate virtual keys only in its Enterprise edition, and Debian's Prometheus
2.42 has no OTLP receiver either. The route is added when the hook is built (LiteLLM builds
callbacks while it loads config.yaml, before it serves; Starlette matches routes per request).
The key is checked here against LiteLLM's own key table (LiteLLM stores sha256 of the key),
so an unknown, blocked or expired key counts nothing.

Only Claude Code's report is wired and measured. Qwen-Code's own OpenTelemetry export (tool-call
decisions among its metrics) and Codex's (log events, not metrics) were not measured here, so
they are not counted; OpenHands' CLI has no such report.
"""

# No `from __future__ import annotations`: FastAPI reads the route's `Request` annotation at
# run time, and that class is imported inside mount() (the unit tests have no FastAPI).
import hashlib
import json
import logging
from dataclasses import dataclass
from typing import Any

from spear.rules import HARNESS_METRICS_PATH
from spear_gateway import metrics

log = logging.getLogger("spear_gateway")
EDIT_DECISION = "claude_code.code_edit_tool.decision"
HARNESS = {EDIT_DECISION: "claude-code"}  # which harness reports which metric
DELTA = 1  # AGGREGATION_TEMPORALITY_DELTA (opentelemetry/proto/metrics/v1/metrics.proto)
# The OTLP/JSON enum may arrive as its name (the spec allows either).
DELTA_NAMES = (DELTA, "AGGREGATION_TEMPORALITY_DELTA")


@dataclass(frozen=True)
class Decision:
    harness: str
    tool: str
    decision: str
    source: str
    count: float


class BadExport(ValueError):
    """An export this receiver cannot count, said so the sender's log shows why."""


def _attributes(point: dict[str, Any]) -> dict[str, str]:
    return {a.get("key"): str(next(iter((a.get("value") or {"": ""}).values())))
            for a in point.get("attributes") or [] if isinstance(a, dict)}


def _count(point: dict[str, Any]) -> float:
    # OTLP/JSON writes a 64-bit integer as a string.
    value = point.get("asDouble", point.get("asInt"))
    try:
        count = float(value)
    except (TypeError, ValueError):
        raise BadExport(f"{EDIT_DECISION}: a data point without a number: {point!r}"[:300]) from None
    if count < 0:
        raise BadExport(f"{EDIT_DECISION}: a negative count {count}")
    return count


def edit_decisions(export: Any) -> list[Decision]:
    """The edit decisions in an OTLP ExportMetricsServiceRequest (JSON); every other metric is
    ignored. A cumulative sum is refused: its points repeat what earlier exports counted."""
    if not isinstance(export, dict) or not isinstance(export.get("resourceMetrics", []), list):
        raise BadExport("not an OTLP metrics export (a JSON object with resourceMetrics)")
    found = []
    for resource in export.get("resourceMetrics", []):
        for scope in (resource or {}).get("scopeMetrics") or []:
            for metric in (scope or {}).get("metrics") or []:
                harness = HARNESS.get((metric or {}).get("name"))
                if harness is None:
                    continue
                total = metric.get("sum") or {}
                if total.get("aggregationTemporality") not in DELTA_NAMES:
                    raise BadExport(
                        f"{metric['name']}: cumulative temporality; set"
                        " OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE=delta")
                for point in total.get("dataPoints") or []:
                    labels = _attributes(point)
                    found.append(Decision(harness, labels.get("tool_name", ""),
                                          labels.get("decision", ""), labels.get("source", ""),
                                          _count(point)))
    return found


def count(owner: tuple[str, str], decisions: list[Decision]) -> None:
    developer, team = owner
    for d in decisions:
        metrics.EDIT_DECISIONS.labels(developer, team, d.harness, d.tool, d.decision,
                                      d.source).inc(d.count)


def key_hash(authorization: str | None) -> str | None:
    """LiteLLM's token column for a `Bearer <key>` header (litellm.proxy._types.hash_token)."""
    scheme, _, key = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        return None
    return hashlib.sha256(key.strip().encode()).hexdigest()


def mount(hook: Any) -> None:
    """Add the receiver to LiteLLM's app; `hook` is the SpearGateway whose store knows the keys."""
    from fastapi import Request
    from fastapi.responses import JSONResponse
    from litellm.proxy.proxy_server import app

    async def receive(request: Request) -> JSONResponse:
        token = key_hash(request.headers.get("authorization"))
        if token is None:
            return JSONResponse({"message": "a developer's key as `Authorization: Bearer`"}, 401)
        if "json" not in (request.headers.get("content-type") or ""):
            return JSONResponse({"message": "OTLP/HTTP JSON only: set"
                                 " OTEL_EXPORTER_OTLP_METRICS_PROTOCOL=http/json"}, 415)
        owner = await hook._call("key_owner", token)
        if owner is None:
            return JSONResponse({"message": "unknown, blocked or expired key"}, 401)
        try:
            decisions = edit_decisions(json.loads(await request.body()))
        except (ValueError, BadExport) as err:  # json's errors are ValueErrors too
            log.warning("spear_gateway: a harness export refused: %s", err)
            return JSONResponse({"message": str(err)}, 400)
        count(owner, decisions)
        return JSONResponse({})  # ExportMetricsServiceResponse: everything accepted

    if not any(getattr(route, "path", None) == HARNESS_METRICS_PATH for route in app.routes):
        app.add_api_route(HARNESS_METRICS_PATH, receive, methods=["POST"], include_in_schema=False)
