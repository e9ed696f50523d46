"""spear-fleet's LiteLLM callbacks: the 429/5xx-only hatch, budgets that hold, and what the
gateway stamps on each `coder` request (cache_salt, priority, ring).

Which mechanism, and why (read in the installed source of litellm 1.91.1 and 1.108.7, and
run on both)
-------------------------------------------------------------------------------------------
LiteLLM's generic fallbacks fire on every error: `Router.async_function_with_fallbacks`
(router.py 1.91.1 l.6193, 1.108.7 l.8251) catches any exception and
`async_function_with_fallbacks_common_utils` (l.5936 / l.7968) hands it to `run_async_fallback`
(router_utils/fallback_event_handlers.py 1.91.1 l.84, 1.108.7 l.723) without looking at its
status. No setting restricts fallbacks by status on both versions (1.108.7's
`FallbackAccessCheck`/`FallbackBudgetCheck`, types/router.py l.1186, do not exist in 1.91.1). So:

1. The hatch is this request's own fallback, set by `async_pre_call_hook` as LiteLLM's
   per-request `fallbacks` (read by `kwargs.get("fallbacks", self.fallbacks)`, router.py 1.91.1
   l.6201, 1.108.7 l.8282; a list of names takes the "non-standard format" path, l.6045 /
   l.8095). config.yaml sets no fallbacks: without this hook there is no escalation at all.
2. `async_log_failure_event` records the fleet's failure for the request. LiteLLM awaits it
   inline in the failed call's own path, before the router falls back (utils.py wrapper_async
   `await logging_obj.async_failure_handler(...)`, 1.91.1 l.1805, 1.108.7 l.2298, which awaits
   each CustomLogger's async_log_failure_event, litellm_logging.py 1.91.1 l.2915, 1.108.7
   l.4215).
3. `async_filter_deployments` runs when the router picks the hatch's deployment for the
   fallback attempt, before any call to it (router.py 1.91.1 l.7185, 1.108.7 l.9521; what it
   raises propagates). After a client error it raises, and the frontier is never called:
   `run_async_fallback` fails, and `async_function_with_fallbacks_common_utils` ends in
   `raise original_exception` (1.91.1 l.6190, 1.108.7 l.8248), so the developer gets the fleet's
   400/401/404/422 unchanged. After 429, 5xx or no answer it holds the escalation against the
   hatch's cap, counts it, and lets the call go.
4. `async_post_call_failure_hook` (proxy level; it may return the HTTPException the client
   gets, custom_logger.py 1.91.1 l.396, 1.108.7 l.474) turns a hatch refused for its cap into
   HTTP 429 `hatch_budget_exhausted` instead of the fleet's error, and releases the hold.
Rejected: `router_settings.fallbacks` gated by the same filter (works, but a config without this
hook would escalate every error); `async_pre_call_deployment_hook` (runs inside the deployment
call: a refusal there is logged as a failure OF the frontier deployment and can put it in
cooldown); a `custom_provider_map` wrapper around the fleet (re-implements routing, retries and
streaming). On 1.108.7 the router also checks that the key could call the fallback target
itself (proxy/auth/fallback_model_access.py, `enforce_fallback_model_access`, default true):
developer keys are scoped to `coder` only, so the rendered config sets it to false (measured:
with it left true, every escalation of a coder-only key on 1.108.7 ended in the fleet's 503),
and this hook refuses `frontier` asked for directly (403 `hatch_not_direct`).

Tenancy: cache_salt, priority and rings (spear_gateway/tenancy.py says what and why)
----------------------------------------------------------------------------------
5. `async_pre_call_hook` (admission, before routing) takes the client's `cache_salt` and
   `priority` out of the request (and out of `extra_body`), and its thinking asks (the model has
   no thinking mode: spear_gateway/thinking.py), refuses a `priority` that is not an
   integer (HTTP 400 `spear_bad_priority`), and records in the request's metadata what the key's
   owner gets: the salt, the priority, the ring. Out before routing also because
   `Router.acompletion` sends a request with an integer `priority` through LiteLLM's own
   scheduler, `schedule_acompletion`, which consumes it (router.py 1.91.1 l.1824 and l.1834,
   1.108.7 l.3152 and l.3164).
6. Rings: `async_filter_deployments` for the fleet's group, called by `async_get_healthy_deployments`
   with `model` the group's name and the group's deployments as dicts with their `model_info`
   (1.91.1 l.10188 -> l.7185, 1.108.7 l.14192 -> l.9521), after the cooldown filter, on every
   attempt (retries included), with the request's kwargs (our metadata) as `request_kwargs`.
   A pilot keeps the `spear_track: canary` deployments (all the others when none is there),
   everyone else drops them. A request naming a deployment's id instead of the group returns
   before this filter (1.91.1 l.10152, 1.108.7 l.14142): only the master key can ask for one,
   developer keys being scoped to `coder`.
7. The body a deployment gets: `async_pre_call_deployment_hook`, awaited by the `@client` wrapper
   of `litellm.acompletion` once the router has chosen the deployment (utils.py wrapper_async
   1.91.1 l.1606, helper l.1139; 1.108.7 l.2082, helper l.1520), with kwargs carrying that
   deployment's `model_info` (Router._update_kwargs_with_deployment, router.py 1.91.1 l.2955,
   1.108.7 l.4512). It sets `cache_salt` and `priority` where model_info says the deployment
   takes them (`spear_cache_salt`, `spear_priority`) and removes them everywhere else (the
   hatch's deployment too). LiteLLM's OpenAI provider puts a kwarg it does not know into
   `extra_body` (utils.py add_provider_specific_params_to_optional_params, 1.91.1 l.4330,
   1.108.7 l.5458), which the OpenAI client merges into the body: both reach vLLM as the
   top-level fields of /v1/chat/completions it reads. /v1/messages (Claude Code) and
   /v1/responses (Codex) are bridged onto that same acompletion (the Messages adapter passes
   the hook's kwargs on, anthropic adapters/handler.py 1.91.1 l.494, 1.108.7 l.818), so all
   three dialects are stamped alike (measured on both versions with stand-ins that record each
   body: tests/integration/test_gateway_stamping.py). Nothing is refused in this hook: a refusal
   here would count as a failure of the deployment (see "Rejected" above).
8. Prefix affinity: in the same hook, a fleet track's deployment whose model_info names its pods
   (`spear_pods`) gets the `api_base` of the pod spear/affinity.py picks (pods.py lists them),
   which the wrapper then calls (`original_function(*args, **kwargs)` with the hook's kwargs, the
   same lines as 7.), without the router's client for the Service's address; a retry picks again. The pod is released when the request ends (success,
   failure, a client gone), and a pod that refused the connection is skipped for the next pick.

Budgets: `async_pre_call_hook` (before routing) reserves the request's worst case against the
key's max_budget (user_api_key_dict.max_budget / .spend / .budget_reset_at) in the shared ledger
and refuses with HTTP 429 `spear_budget_exceeded`; the success event settles the actual cost
exactly once; a failure releases the hold. See spear_gateway/__init__.py for the configuration.

A client gone mid-stream (Ctrl-C in a harness, a closed editor): LiteLLM calls neither the
success nor the failure callbacks for it (proxy_server.py async_data_generator catches
CancelledError/GeneratorExit, releases only its own parallel-request counter, and closes the
upstream stream: 1.91.1 l.6977, 1.108.7 the same path in common_request_processing.py), so the
hold stayed until its TTL and was then charged in full. `async_post_call_streaming_iterator_hook`
wraps the stream it sends (both versions call it for every callback that overrides it), counts
what it carried, and when the stream ends without its end (the client is gone) settles the hold
at once: the prompt's upper bound plus the output chunks sent (one token each, as vLLM and
llama-server stream), never above the hold; `_in_flight.pop` makes it exactly once against the
success path, which finds nothing left to settle. A client that leaves before a plain answer:
LiteLLM cancels the fleet's call (config.yaml's cancel_on_disconnect) and reports a 499 to the
failure hook, which settles the prompt's bound. Every MEASURE_EVERY_SECONDS it also writes
what the stream used so far to the ledger (`measure`): if this process dies mid-stream, the hold's
expiry charges that, not the worst case.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from fastapi import HTTPException
from litellm.integrations.custom_logger import CustomLogger

from spear_gateway import edits, exporter, metrics, tls_listener
from spear_gateway.budget import ContractViolation, HoldExpired, Ledger
from spear_gateway.hatch import FleetFailure, fleet_failure
from spear_gateway.pods import FleetApi, PodDirectory, Track
from spear_gateway.pricing import (Prices, StreamedUsage, output_limit,
                                   prompt_tokens_upper_bound, usage_of, usage_usd, worst_case_usd)
from spear_gateway.settings import Settings
from spear_gateway.tenancy import BadPriority, Tenant, ring_deployments, stamp, take_owned
from spear_gateway.thinking import drop_thinking
from spear_gateway.tool_types import is_responses, keep_function_tools
from spear.affinity import session_key

log = logging.getLogger("spear_gateway")
# How often a stream's use so far is written to the ledger, for its hold's expiry should this
# process die before the stream ends (a write per stream every this many seconds).
MEASURE_EVERY_SECONDS = 5.0
# What LiteLLM answers (to nobody) when a client leaves before a plain answer and
# cancel_on_disconnect cancelled the call (common_request_processing.py, 1.91.1 and 1.108.7).
CLIENT_GONE = 499
REQUEST_ID = "spear_request_id"  # the metadata field that carries the ledger's request id
STAMP = "spear_stamp"  # ... and the one with what admission decided: cache_salt, priority, ring
METADATA_FIELDS = ("litellm_metadata", "metadata")  # /v1/messages and /v1/responses use the first


@dataclass
class InFlight:
    """What this process knows about one admitted request until it ends."""

    key: str
    held_usd: float
    failure: FleetFailure | None = None
    error: BaseException | None = None
    hatch_held_usd: float = 0.0
    escalated: bool = False
    hatch_refused: bool = False
    admitted: float = field(default_factory=time.monotonic)


def _metadata(data: dict[str, Any] | None) -> dict[str, Any]:
    for name in METADATA_FIELDS:
        if isinstance((data or {}).get(name), dict) and REQUEST_ID in data[name]:
            return data[name]
    return {}


def _event_metadata(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The metadata of a logging event's request (LiteLLM moves it into litellm_params)."""
    return _metadata(kwargs.get("litellm_params")) or _metadata(kwargs)


def _names_a_deployment(model: object) -> bool:
    """Whether `model` is a deployment's id rather than a model group's name. LiteLLM's proxy
    sends such a request straight to that deployment (`specific_deployment`), past the ring
    filter: any key, the master key included, could otherwise name the canary."""
    from litellm.proxy import proxy_server  # the running proxy's router, set at its startup

    router = getattr(proxy_server, "llm_router", None)
    return (isinstance(model, str) and router is not None and model not in router.model_names
            and router.has_model_id(model))


def _model_group(kwargs: dict[str, Any]) -> str | None:
    params = kwargs.get("litellm_params") or {}
    for meta in (params.get("metadata"), params.get("litellm_metadata"), kwargs.get("metadata")):
        if isinstance(meta, dict) and meta.get("model_group"):
            return meta["model_group"]
    return kwargs.get("model_group")


class Refusal(HTTPException):
    """A refusal the developer sees: the proxy answers `status` with error type `type` (both
    versions read the type from the exception's `type` attribute), raised from a hook or
    returned from async_post_call_failure_hook, which accepts only an HTTPException."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(status_code=status, detail=message)
        self.type, self.message, self.param = kind, message, None


class SpearGateway(CustomLogger):
    def __init__(self) -> None:
        super().__init__()
        # LiteLLM applies config.yaml's environment_variables before it loads callbacks
        # (proxy_server.py load_config, 1.91.1 l.3952 then l.4082; 1.108.7 l.6392 then l.6537):
        # a bad setting stops the proxy at start-up, naming the variable.
        self.settings = Settings.from_environment(os.environ)
        metrics.HATCH_CAP_USD.set(self.settings.hatch_cap_usd)
        self._store: Any = None
        self._store_lock = asyncio.Lock()  # the first requests arrive together: one pool
        self._in_flight: dict[str, InFlight] = {}
        self._background: set[asyncio.Task] = set()  # settlements and checkpoints of streams
        metrics.IN_FLIGHT.set_function(lambda: len(self._in_flight))
        self.pods = PodDirectory(FleetApi(*self.settings.fleet_api)
                                 if self.settings.fleet_api else None)
        edits.mount(self)

    async def store(self) -> Any:
        async with self._store_lock:
            if self._store is None:
                await self._open_store()
        return self._store

    async def _open_store(self) -> None:
        settings = self.settings
        if settings.database_url:
            from spear_gateway.pg_store import PgStore
            self._store = await asyncio.to_thread(
                PgStore, settings.database_url, settings.hatch_cap_usd,
                hold_ttl_seconds=settings.hold_ttl_seconds)
        else:  # config-only mode: one process, no keys, only the hatch's cap to keep
            log.warning("spear_gateway: no database; the budget ledger lives in this process")
            self._store = Ledger(hatch_cap_usd=settings.hatch_cap_usd,
                                 hold_ttl_seconds=settings.hold_ttl_seconds)
        exporter.export(self._store)

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        store = await self.store()
        if isinstance(store, Ledger):
            return getattr(store, method)(*args, **kwargs)
        return await asyncio.to_thread(getattr(store, method), *args, **kwargs)

    @staticmethod
    def _prices(model_group: str) -> Prices:
        """The highest per-token prices among the group's deployments (what LiteLLM bills)."""
        from litellm import model_cost
        from litellm.proxy.proxy_server import llm_router
        inputs, outputs = [0.0], [0.0]
        for deployment in (llm_router.get_model_list(model_name=model_group) or []) if llm_router else []:
            params, info = deployment.get("litellm_params") or {}, deployment.get("model_info") or {}
            known = model_cost.get(str(params.get("model", "")).split("/", 1)[-1], {})
            for prices, name in ((inputs, "input_cost_per_token"), (outputs, "output_cost_per_token")):
                value = params.get(name, info.get(name, known.get(name)))
                if isinstance(value, (int, float)):
                    prices.append(float(value))
        return Prices(max(inputs), max(outputs))

    # -- 1. admission (proxy level, before routing) -------------------------------------------

    async def async_pre_call_hook(self, user_api_key_dict: Any, cache: Any, data: dict,
                                  call_type: Any) -> dict:
        settings = self.settings
        model = data.get("model")
        if model == settings.hatch_model:
            raise Refusal(403, "hatch_not_direct",
                          f"'{model}' is the gateway's hatch: it answers only when the fleet "
                          f"cannot (429, 5xx, no answer); ask for '{settings.fleet_model}'")
        if model != settings.fleet_model and _names_a_deployment(model):
            raise Refusal(403, "spear_deployment_not_direct",
                          f"'{model}' is one of the gateway's deployments, not a model: ask for "
                          f"'{settings.fleet_model}', and the key's ring decides what serves it")
        if model != settings.fleet_model:
            return data
        key = getattr(user_api_key_dict, "token", None) or "master-key"
        tenant = Tenant.of(key, getattr(user_api_key_dict, "metadata", None))
        # Before routing: the hatch never gets the client's fields, nor LiteLLM's scheduler its
        # priority (see 5. above).
        try:
            priority = tenant.priority(take_owned(data))
        except BadPriority as e:
            raise Refusal(400, "spear_bad_priority", str(e)) from None
        drop_thinking(data)  # the model has none; LiteLLM would refuse the ask (thinking.py)
        if is_responses(call_type):
            keep_function_tools(data)  # the fleet refuses any other kind (tool_types.py)
        limit = output_limit(data)
        if limit is None:  # the hold must bound the answer: the gateway sets the limit
            limit = settings.default_max_tokens
            data["max_tokens"] = limit
        worst = max(worst_case_usd(data, self._prices(model), limit), 1e-9)
        budget = getattr(user_api_key_dict, "max_budget", None)
        reset_at = getattr(user_api_key_dict, "budget_reset_at", None)
        request_id = uuid.uuid4().hex
        verdict = await self._call(
            "admit", key, request_id, worst, budget,
            window=reset_at.isoformat() if reset_at else "",
            spend_usd=float(getattr(user_api_key_dict, "spend", 0.0) or 0.0))
        if verdict != "fleet":
            metrics.BUDGET_REJECTIONS.inc()
            raise Refusal(429, "spear_budget_exceeded",
                          f"SpearBudgetExceeded: this request may cost up to ${worst:.6f} and "
                          f"the key's budget of ${budget} cannot hold it with its spend and its "
                          "requests in flight; lower max_tokens or wait for them to finish")
        self._forget_expired()
        self._in_flight[request_id] = InFlight(key, worst)
        # The hatch as this request's own fallback (LiteLLM's per-request `fallbacks`): without
        # this hook loaded there is no fallback at all, and config.yaml sets none.
        data["fallbacks"] = [settings.hatch_model]
        targets = [data[n] for n in METADATA_FIELDS if isinstance(data.get(n), dict)]
        if not targets:
            data["metadata"] = {}
            targets = [data["metadata"]]
        decided = {"cache_salt": tenant.cache_salt(settings.cache_salt_scope),
                   "priority": priority, "ring": tenant.ring}
        for meta in targets:
            meta[REQUEST_ID], meta[STAMP] = request_id, decided
        return data

    def _forget_expired(self) -> None:
        """A request whose end LiteLLM never reported (a client gone mid-stream is settled at
        once; this is for what no hook saw end) is forgotten here when the ledger expires its
        hold."""
        cutoff = time.monotonic() - self.settings.hold_ttl_seconds
        for request_id in [r for r, f in self._in_flight.items() if f.admitted < cutoff]:
            del self._in_flight[request_id]
            self.pods.release(request_id)

    # -- 2. the hatch (router level) ---------------------------------------------------------

    async def async_log_failure_event(self, kwargs: dict, response_obj: Any, start_time: Any,
                                      end_time: Any) -> None:
        request = self._in_flight.get(_event_metadata(kwargs).get(REQUEST_ID))
        if request is None or _model_group(kwargs) != self.settings.fleet_model:
            return
        error = kwargs.get("exception")
        if isinstance(error, BaseException):
            request.failure, request.error = fleet_failure(error), error
            pod = self.pods.assigned(_event_metadata(kwargs).get(REQUEST_ID))
            if pod is not None and request.failure.status == "connection":
                self.pods.quarantine(pod)  # the retry picks another (pods.py)

    async def async_filter_deployments(self, model: str, healthy_deployments: list,
                                       messages: Any, request_kwargs: dict | None = None,
                                       parent_otel_span: Any = None) -> list:
        if model == self.settings.fleet_model:
            ring = (_metadata(request_kwargs).get(STAMP) or {}).get("ring")
            return ring_deployments(ring, healthy_deployments)
        if model != self.settings.hatch_model:
            return healthy_deployments
        request_id = _metadata(request_kwargs).get(REQUEST_ID)
        request = self._in_flight.get(request_id)
        if request is None or request.failure is None:
            # Not an escalation of an admitted fleet request: the hatch stays shut.
            raise Refusal(403, "hatch_not_direct", f"'{model}' answers only escalations")
        if not request.failure.escalates:
            raise request.error  # run_async_fallback fails; the developer gets this, unchanged
        estimate = worst_case_usd(request_kwargs or {}, self._prices(model),
                                  output_limit(request_kwargs or {}) or self.settings.default_max_tokens)
        verdict = await self._call("escalate", request_id, request.failure.status,
                                   max(estimate, 1e-9), month=exporter.this_month())
        if verdict != "hatch":
            request.hatch_refused = True
            metrics.HATCH_REJECTIONS.labels(status=request.failure.label).inc()
            raise Refusal(429, "hatch_budget_exhausted", "the hatch's monthly cap is reached")
        if not request.escalated:
            request.escalated, request.hatch_held_usd = True, estimate
            metrics.HATCH_ESCALATIONS.labels(status=request.failure.label).inc()
        return healthy_deployments

    # -- 3. the request a deployment gets (inside the call to it) ------------------------------

    async def async_pre_call_deployment_hook(self, kwargs: dict, call_type: Any) -> dict | None:
        decided = _metadata(kwargs).get(STAMP)
        if decided is None:  # not a coder request (nor its escalation)
            return None
        info = kwargs.get("model_info") or _metadata(kwargs).get("model_info") or {}
        stamp(kwargs, info, decided["cache_salt"], decided["priority"])
        track = Track.of(info)
        if track is not None:  # a fleet track routed by prefix affinity (pods.py)
            pod = self.pods.assign(_metadata(kwargs).get(REQUEST_ID), track,
                                   session_key(decided["cache_salt"], kwargs.get("messages")))
            if pod is not None:
                kwargs["api_base"] = f"http://{pod}/v1"
                # The router hands over its client for the Service's address (router.py 1.91.1
                # l.2667 `_get_async_openai_model_client`, 1.108.7 the same), which would call
                # the Service whatever api_base says: without it LiteLLM makes one for the pod's
                # address and keeps it (its in-memory client cache, keyed by api_base).
                kwargs.pop("client", None)
        return kwargs

    # -- 4. settlement -----------------------------------------------------------------------

    async def async_log_success_event(self, kwargs: dict, response_obj: Any, start_time: Any,
                                      end_time: Any) -> None:
        request_id = _event_metadata(kwargs).get(REQUEST_ID)
        request = self._in_flight.pop(request_id, None)
        self.pods.release(request_id)
        if request is None:
            return
        usage = usage_of(response_obj)
        cost = kwargs.get("response_cost")
        if request.escalated:  # the key pays the fleet's price; the hatch's cap the frontier's
            key_usd = usage_usd(usage, self._prices(self.settings.fleet_model))
            hatch_usd = float(cost) if isinstance(cost, (int, float)) else usage_usd(
                usage, self._prices(self.settings.hatch_model))
        else:
            key_usd = float(cost) if isinstance(cost, (int, float)) else usage_usd(
                usage, self._prices(self.settings.fleet_model))
            hatch_usd = 0.0
            _observe_ttft(kwargs, start_time)
        await self._settle(request_id, request, key_usd, hatch_usd)

    async def async_post_call_failure_hook(self, request_data: dict, original_exception: Exception,
                                           user_api_key_dict: Any, traceback_str: str | None = None):
        request_id = _metadata(request_data).get(REQUEST_ID)
        request = self._in_flight.pop(request_id, None)
        self.pods.release(request_id)
        if request is None:
            return None
        if getattr(original_exception, "status_code", None) == CLIENT_GONE:
            # The client left before a plain answer; LiteLLM cancelled the fleet's call
            # (cancel_on_disconnect): the prompt was asked of it, nothing was answered.
            metrics.SETTLED_ON_DISCONNECT.inc()
            await self._settle(request_id, request,
                               *self._used(request, request_data, StreamedUsage()))
            return None
        await self._settle(request_id, request, 0.0, 0.0)  # nothing was served: release
        if request.hatch_refused:
            return Refusal(
                429, "hatch_budget_exhausted",
                f"HatchBudgetExhausted: the fleet answered {request.failure.label} and the "
                f"hatch's monthly cap of ${self.settings.hatch_cap_usd} is reached (counting "
                "escalations in flight); the request was not sent to the frontier")
        return None

    # -- 5. a client gone mid-stream --------------------------------------------------------

    async def async_post_call_streaming_iterator_hook(self, user_api_key_dict: Any, response: Any,
                                                      request_data: dict):
        request_id = _metadata(request_data).get(REQUEST_ID)
        streamed = StreamedUsage()
        checkpoint = time.monotonic()
        try:
            async for chunk in response:
                streamed.add(chunk)
                if time.monotonic() - checkpoint >= MEASURE_EVERY_SECONDS:
                    checkpoint = time.monotonic()
                    self._measure(request_id, request_data, streamed)
                yield chunk
        except (GeneratorExit, asyncio.CancelledError):
            self.settle_cut(request_id, request_data, streamed)
            raise

    def _used(self, request: InFlight, request_data: dict,
              streamed: StreamedUsage) -> tuple[float, float]:
        """What a stream has used so far, priced as the success path prices it (the key pays the
        fleet's price, the hatch's cap the frontier's when the stream was the hatch's), never
        above the holds."""
        usage = streamed.usage(prompt_tokens_upper_bound(request_data))
        key_usd = min(usage_usd(usage, self._prices(self.settings.fleet_model)), request.held_usd)
        hatch_usd = min(usage_usd(usage, self._prices(self.settings.hatch_model)),
                        request.hatch_held_usd) if request.escalated else 0.0
        return key_usd, hatch_usd

    def _in_background(self, work: Any) -> None:
        """Run `work` as a task of its own (the request's task may be cancelled under it)."""
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)  # the loop keeps only a weak reference to a task
        task.add_done_callback(self._background.discard)

    def _measure(self, request_id: str | None, request_data: dict,
                 streamed: StreamedUsage) -> None:
        """Record what a long stream has used so far in the ledger: what its hold's expiry
        charges if this process dies before it ends."""
        request = self._in_flight.get(request_id) if request_id else None
        if request is not None:
            async def measure() -> None:
                try:
                    await self._call("measure", request_id, self._used(request, request_data,
                                                                       streamed)[0])
                except Exception as e:  # noqa: BLE001 (a checkpoint is best effort)
                    log.warning("spear_gateway: measuring %s failed: %s", request_id, e)
            self._in_background(measure())

    def settle_cut(self, request_id: str | None, request_data: dict,
                   streamed: StreamedUsage) -> None:
        """Settle a stream whose client went away: what it used, now, exactly once."""
        request = self._in_flight.pop(request_id, None) if request_id else None
        self.pods.release(request_id)
        if request is None:
            return  # settled already (its success was logged), or not a coder request
        metrics.SETTLED_ON_DISCONNECT.inc()
        self._in_background(self._settle(request_id, request,
                                         *self._used(request, request_data, streamed)))

    async def _settle(self, request_id: str, request: InFlight, key_usd: float,
                      hatch_usd: float) -> None:
        try:
            await self._call("settle", request_id, key_usd, hatch_usd)
        except HoldExpired as e:  # charged in full already: nothing more to settle
            metrics.HOLDS_EXPIRED_THEN_SETTLED.inc()
            log.warning("spear_gateway: %s", e)
        except ContractViolation as e:
            # Only an answer longer than max_tokens, or a price above the hold's, gets here:
            # charge the holds in full rather than leave them held for ever, and say so.
            metrics.SETTLED_ABOVE_HOLD.inc()
            log.error("spear_gateway: %s; settling at the hold", e)
            await self._call("settle", request_id, min(key_usd, request.held_usd),
                             min(hatch_usd, request.hatch_held_usd))


def _observe_ttft(kwargs: dict, start_time: Any) -> None:
    """The fleet's time to first token by stamped priority (LiteLLM sets completion_start_time
    at the first chunk, or at the answer when not streamed)."""
    first = kwargs.get("completion_start_time")
    priority = (_event_metadata(kwargs).get(STAMP) or {}).get("priority")
    if hasattr(first, "timestamp") and hasattr(start_time, "timestamp") and priority is not None:
        metrics.FLEET_TTFT.labels(priority=str(priority)).observe(
            max(0.0, first.timestamp() - start_time.timestamp()))


proxy_handler_instance = SpearGateway()
# gateway.listen.tls: LiteLLM imports this module inside its startup, on its event loop, which
# is where the HTTPS listener must run (tls_listener.py says why it is in this process).
tls_listener.start()
