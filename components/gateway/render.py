"""Pure renderers of what the gateway host runs: LiteLLM's config.yaml, the env files, the
spear-gateway unit and the tunnel units. Typed config in, file text out; no Pulumi, no SSH.

config.yaml holds no secret: every credential is `os.environ/<NAME>`, read from the env files
(0600) on the gateway host.
"""

from __future__ import annotations

import hashlib
import posixpath
import shlex
import string
from dataclasses import dataclass
from pathlib import Path

import yaml

from config.types import EXTERNAL_DATABASE, OFFLINE_ENGINE, FleetConfig, Gateway, Hatch
from spear.harness import Window
from spear.rules import (CODER_MODEL, FLEET_UPSTREAM, FRONTIER_MODEL, HATCH_CALLBACK,
                         RECEIPT_CALLBACK, TLS_CERTIFICATE_ENV, TLS_KEY_ENV, TLS_LISTEN_ENV,
                         tunnel_unit)

HOSTS_DIR = Path(__file__).resolve().parents[2] / "hosts" / "gateway"
UNIT_TEMPLATE = HOSTS_DIR / "spear-gateway.service"
# The hook package LiteLLM loads from beside config.yaml (PYTHONPATH=<runtime>/config), with the
# pure modules it shares with the policy pack and the deploy checks (the rules; the probes and
# the smoke test a gateway pod proves its fleet routes with): path under config/ -> file here.
SPEAR_DIR = HOSTS_DIR.parents[1] / "spear"
HOOK_FILES = {
    **{f"spear_gateway/{path.name}": path
       for path in sorted((HOSTS_DIR / "spear_gateway").glob("*.py"))},
    **{f"spear/{name}": SPEAR_DIR / name
       for name in ("__init__.py", "affinity.py", "rules.py", "tool_calls.py", "probes.py", "smoke.py",
                    "receipts.py", "vllm.py", "fleet.py")},
}
TUNNEL_TEMPLATE = HOSTS_DIR / "spear-tunnel.service"

# Environment variable names the config refers to (the env files set them).
MASTER_KEY_ENV = "LITELLM_MASTER_KEY"
FRONTIER_KEY_ENV = "FRONTIER_API_KEY"
DATABASE_URL_ENV = "DATABASE_URL"
# Where prefix-affinity routing lists the fleet's pods (hosts/gateway/spear_gateway/settings.py).
FLEET_API_ENV = {"server": "SPEAR_FLEET_API_SERVER", "ca": "SPEAR_FLEET_API_CA",
                 "token": "SPEAR_FLEET_API_TOKEN"}


DEFAULT_MAX_TOKENS = 4096


def upstream_windows(config: FleetConfig) -> dict[str, int | None]:
    """Each of `coder`'s upstreams -> the longest request (prompt and answer) it serves, as the
    stack states it; None for a REDS endpoint this stack does not manage (its server was
    started by hand: the stack does not know its window)."""
    gateway = config.gateway
    hosts = config.inference_hosts

    def host_window(name: str) -> int:
        server = hosts[name].server
        return server.ctx_size // server.parallel  # llama-server splits its window among slots

    windows: dict[str, int | None] = {}
    for name in gateway.upstreams if gateway else ():
        if name == FLEET_UPSTREAM:
            windows[name] = config.vllm_fleet.vllm.max_model_len
        elif name in hosts:
            windows[name] = host_window(name)
        elif name in config.runpod_pods:
            windows[name] = config.runpod_pods[name].vllm.max_model_len
        else:
            managed = config.reds_endpoints[name].inference_host
            windows[name] = host_window(managed) if managed else None
    return windows


def coder_window(config: FleetConfig) -> Window | None:
    """What the harnesses are told `coder` serves: the smallest window among its upstreams
    (the router may send any request to any of them), and an output limit that leaves three
    quarters of it to the prompt, at most the gateway's default. None: no upstream's is known."""
    known = [w for w in upstream_windows(config).values() if w is not None]
    if not known:
        return None
    context = min(known)
    return Window(context, min(DEFAULT_MAX_TOKENS, context // 4))


def upstream_key_env(endpoint: str) -> str:
    """The env var holding the key an endpoint demands (a pod's vLLM key)."""
    return "SPEAR_UPSTREAM_KEY_" + endpoint.upper().replace("-", "_")


@dataclass(frozen=True)
class Route:
    """One of `coder`'s deployments: an endpoint's tunnel on this gateway host's loopback, or a
    track of the Kubernetes fleet at its Service's address."""
    endpoint: str  # the route's name: an endpoint, or vllm-<track>
    api_base: str  # the OpenAI-compatible base URL, .../v1
    served_model: str
    needs_key: bool  # the endpoint demands an API key (upstream_key_env)
    track: str | None = None  # the fleet's stable or canary (the hook routes rings by it)
    # What the upstream accepts that the hook stamps (vLLM: cache_salt; priority only with
    # --scheduling-policy priority); nothing is sent to an upstream that would refuse it.
    cache_salt: bool = False
    priority: bool = False
    # (namespace, Service, port) of a fleet track whose pod the hook picks by prefix affinity
    # (gateway.coder.fleetRouting; spear_gateway/pods.py); None: the Service picks.
    pods: tuple[str, str, int] | None = None

    @classmethod
    def tunnel(cls, endpoint: str, client_port: int, served_model: str, needs_key: bool) -> Route:
        return cls(endpoint, f"http://127.0.0.1:{client_port}/v1", served_model, needs_key)


def model_info(route: Route) -> dict[str, object]:
    """What the hook reads of a deployment (hosts/gateway/spear_gateway: spear_track,
    spear_cache_salt, spear_priority, spear_pods)."""
    info: dict[str, object] = {"id": route.endpoint}
    if route.track:
        info["spear_track"] = route.track
    if route.cache_salt:
        info["spear_cache_salt"] = True
    if route.priority:
        info["spear_priority"] = True
    if route.pods:
        info["spear_pods"] = dict(zip(("namespace", "service", "port"), route.pods))
    return info


# Past the longest a request can take, what the TTL adds: a hold is expired only when its
# gateway process is gone (a client that hangs up is settled at once, litellm_hooks.py).
HOLD_TTL_MARGIN_SECONDS = 60


def hold_ttl_seconds(gateway: Gateway) -> int:
    """How long an unsettled hold lives: the longest a `coder` request can run (each try of the
    fleet and the hatch's, each up to coder.requestTimeout) plus a margin, not an hour."""
    return gateway.request_timeout * (gateway.num_retries + 2) + HOLD_TTL_MARGIN_SECONDS


def render_config(gateway: Gateway, routes: list[Route], cache_salt_scope: str = "team") -> str:
    """LiteLLM's config.yaml (the settings hosts/gateway/spear_gateway/__init__.py documents).

    `coder` is the only name developers see; `frontier` is the hatch. No LiteLLM fallbacks:
    they fire on any error. The hatch hook gives each `coder` request its fallback itself, lets
    it reach the frontier only when the fleet answered 429/5xx or not at all, and holds it
    against the monthly cap.
    """
    price = gateway.pricing
    coder = [{
        "model_name": CODER_MODEL,
        "litellm_params": {
            "model": f"openai/{route.served_model}",
            "api_base": route.api_base,
            "api_key": f"os.environ/{upstream_key_env(route.endpoint)}" if route.needs_key
            else "none",
            # Codex speaks Responses: LiteLLM bridges it onto the fleet's chat completions.
            "use_chat_completions_api": True,
            # Budgets are priced with these (a request's worst case is its max_tokens).
            "input_cost_per_token": price.input_usd_per_token,
            "output_cost_per_token": price.output_usd_per_token,
        },
        "model_info": model_info(route),
    } for route in routes]
    hatch = gateway.hatch
    frontier = {
        "model_name": FRONTIER_MODEL,
        "litellm_params": {
            "model": f"anthropic/{hatch.model}",
            "api_base": hatch.api_base,
            "api_key": f"os.environ/{FRONTIER_KEY_ENV}",
            # The hatch's cap is priced with these.
            "input_cost_per_token": hatch.pricing.input_usd_per_token,
            "output_cost_per_token": hatch.pricing.output_usd_per_token,
        },
    }
    config = {
        "model_list": [*coder, frontier],
        "router_settings": {
            "num_retries": gateway.num_retries,
            # A fleet deployment in cooldown after one developer's 404 would fail every coder
            # request for seconds, neither served nor escalated (measured).
            "disable_cooldowns": True,
        },
        "litellm_settings": {
            # The hatch and budget hooks, the gate's receipts, then LiteLLM's own Prometheus
            # metrics (/metrics).
            "callbacks": [HATCH_CALLBACK, RECEIPT_CALLBACK, "prometheus"],
            # A fleet that does not answer within it escalates.
            "request_timeout": gateway.request_timeout,
            # Claude Code's /v1/messages goes to the fleet's chat completions.
            "use_chat_completions_url_for_anthropic_messages": True,
            # From 1.108 LiteLLM answers 422 over budget; harnesses back off on 429.
            "budget_exceeded_status_code": 429,
            # Else the router appends every coder error's fallback to its message ("Available
            # Model Group Fallbacks=['frontier']", then the hatch's refusal of a client error):
            # the developer read that the frontier was tried when it was not (issue 20).
            "expose_router_debug_in_errors": False,
        },
        "environment_variables": {
            "SPEAR_HATCH_MONTHLY_CAP_USD": str(hatch.monthly_cap_usd),
            # Whose requests share the fleet's prefix cache (vllmFleet.tenancy.cacheSalt).
            "SPEAR_CACHE_SALT_SCOPE": cache_salt_scope,
            "SPEAR_FLEET_MODEL": CODER_MODEL,
            "SPEAR_HATCH_MODEL": FRONTIER_MODEL,
            # The worst case a request without an output limit is held for.
            "SPEAR_DEFAULT_MAX_TOKENS": str(DEFAULT_MAX_TOKENS),
            "SPEAR_HOLD_TTL_SECONDS": str(hold_ttl_seconds(gateway)),
        },
        "general_settings": {
            "master_key": f"os.environ/{MASTER_KEY_ENV}",
            "database_url": f"os.environ/{DATABASE_URL_ENV}",
            # 1.108+: else a key scoped to coder never reaches the hatch (the hook guards it).
            "enforce_fallback_model_access": False,
            # The hooks' ledger holds each request's worst case and settles it exactly once,
            # a stream its client cut short included. LiteLLM's own reservation (1.84+) is
            # released on a cut only when no chunk was sent (1.91.1 common_request_processing.py
            # l.2507): otherwise it pins the key's counter and refuses it 429 until its TTL.
            "disable_budget_reservation": True,
            # A client that leaves before a plain answer cancels the fleet's call, so a dropped
            # 16k-token answer does not keep a replica busy (a stream's is closed regardless).
            "cancel_on_disconnect": True,
        },
    }
    return ("# config.yaml: generated by spear-fleet (components/gateway/render.py) from stack"
            " config.\n# No secrets here: os.environ/<NAME> comes from the 0600 env files.\n"
            + yaml.safe_dump(config, sort_keys=False))


def config_facts(gateway: Gateway, upstreams: list[str]) -> dict[str, object]:
    """What policies and reviewers read beside config.yaml: what `coder` routes to and what the
    hatch may spend (policies/common.py::gateway_config_view)."""
    hatch = gateway.hatch
    return {"upstreams": upstreams, "litellm_version": gateway.litellm_version,
            "hatch": {"from": CODER_MODEL, "to": FRONTIER_MODEL,
                      "monthly_cap_usd": hatch.monthly_cap_usd, "alert_usd": hatch.alert_usd}}


def hatch_outputs(hatch: Hatch) -> dict[str, object]:
    """The hatch as the stack reports it, with the limit only the operator can set: the
    provider's own spend limit on the frontier key, at the cap, since the gateway's cap holds
    only what passes through the gateway."""
    return {"monthly_cap_usd": hatch.monthly_cap_usd, "alert_usd": hatch.alert_usd,
            "provider_limit": f"set the monthly spend limit of frontierApiKey's account at"
                              f" {hatch.api_base} to {hatch.monthly_cap_usd:g} USD (it cannot"
                              " be set from here)"}


def hooks_digest() -> str:
    digest = hashlib.sha256()
    for remote, local in HOOK_FILES.items():
        digest.update(remote.encode() + b"\0" + local.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def render_env(values: dict[str, str]) -> str:
    """A systemd EnvironmentFile (values quoted for systemd's parser)."""
    lines = [f'{name}="{value}"' for name, value in values.items()
             if not any(c in value for c in '"\\\n$')]
    if len(lines) != len(values):
        raise ValueError("a secret with a quote, backslash, newline or $ cannot go in an env file")
    return "# generated by spear-fleet; secrets: 0600, root only\n" + "\n".join(lines) + "\n"


def engine_environment(gateway: Gateway) -> dict[str, str]:
    """What prisma-client-py needs on the host to run the offline query engine."""
    if gateway.database.query_engine != OFFLINE_ENGINE:
        return {}
    engine = f"{gateway.runtime_dir}/engine"  # the installed bundle (components/gateway/install.py)
    return {"PRISMA_QUERY_ENGINE_BINARY": f"{engine}/query-engine",
            "PRISMA_SCHEMA_ENGINE_BINARY": f"{engine}/schema-engine",
            "PRISMA_BINARY_CACHE_DIR": engine}


def tls_files(gateway: Gateway) -> tuple[str, str]:
    """Where gateway.listen.tls's certificate bundle and key are on the gateway host."""
    return (posixpath.join(gateway.runtime_dir, "tls", "gateway.crt"),
            posixpath.join(gateway.runtime_dir, "tls", "gateway.key"))


def tls_environment(gateway: Gateway) -> dict[str, str]:
    """What the hooks' HTTPS listener reads (hosts/gateway/spear_gateway/tls_listener.py)."""
    listener = gateway.tls_listener
    if listener is None:
        return {}
    certificate, key = tls_files(gateway)
    return {TLS_LISTEN_ENV: f"{listener.address}:{listener.port}",
            TLS_CERTIFICATE_ENV: certificate, TLS_KEY_ENV: key}


def render_unit(gateway: Gateway, tunnel_units: list[str]) -> str:
    after = [*tunnel_units]
    if gateway.database.location != EXTERNAL_DATABASE:
        after.append(database_unit(gateway))
    engine_env = "\n".join(f"Environment={name}={value}" for name, value in
                           {**engine_environment(gateway), **tls_environment(gateway)}.items())
    return string.Template(UNIT_TEMPLATE.read_text()).substitute(
        runtime_dir=gateway.runtime_dir, host=gateway.host, port=gateway.port,
        after=" ".join(after), engine_env=engine_env)


def database_unit(gateway: Gateway) -> str:
    """The local PostgreSQL cluster's unit (Debian's postgresql@<version>-<cluster>)."""
    return "postgresql@15-spear.service"


def render_tunnel_unit(gateway: Gateway, endpoint: str, ssh_host: str, ssh_port: int,
                       ssh_user: str, address: str, remote_port: int, client_port: int) -> str:
    return string.Template(TUNNEL_TEMPLATE.read_text()).substitute(
        unit=tunnel_unit(endpoint), endpoint=endpoint, runtime_dir=gateway.runtime_dir,
        ssh_host=shlex.quote(ssh_host), ssh_port=int(ssh_port), ssh_user=ssh_user,
        address=address, remote_port=remote_port, client_port=client_port)
