"""Runs a rule as the engine does, without the engine.

As in pulumi-policy's own tests: the policy's `validate` is called with ResourceValidationArgs
or StackValidationArgs and a report callback that collects the messages. The props go through
pulumi-policy's unknown-checking proxy, as the engine's do, and numbers are floats, as the
engine's JSON makes them. `prod(token)` gives the prod stack's resources as `pulumi preview` shows
them (abridged to what the rules read), for tests to break one thing at a time.
"""

from __future__ import annotations

import copy
from typing import Any

from pulumi_policy import (Policy, PolicyCustomTimeouts, PolicyResource, PolicyResourceOptions,
                           ResourceValidationArgs, StackValidationArgs)
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, unknown_checking_proxy

from components.gateway.render import Route, render_config, render_env
from config.load import parse_stack
from spear import tokens
from spear.tokens import Token
from tests.support.config_cases import FRONTIER_KEY, MASTER_KEY, gateway_raw
from tests.support.stack_files import DUMMY_KEY, SEED_COMMAND_LINE

UNKNOWN = UNKNOWN_STRING_VALUE
STACK_URN = "urn:pulumi:prod::spear-fleet::pulumi:pulumi:Stack::spear-fleet-prod"

_NAMES = {tokens.LLAMA_SERVER_BUILD: "reds-llama-server", tokens.MODEL_FILES: "reds-model",
          tokens.SERVER_CONF: "reds-server-conf", tokens.SYSTEMD_UNIT: "reds-unit",
          tokens.RUNPOD_POD: "gpu-pod", tokens.POD_VLLM: "gpu-vllm",
          tokens.GATEWAY_CONFIG: "gateway-config", tokens.GATEWAY_ENV: "gateway-env",
          tokens.TUNNEL_KEY: "gateway-tunnel-reds-key", tokens.GATEWAY_TUNNEL: "gateway-tunnel-reds",
          tokens.GATEWAY_KEY: "gateway-key-ana"}

# Seed 001 step 3: the cookbook's serve command, flag by flag, without its `--api-key
# "$VLLM_API_KEY"` (the key reaches vLLM as VLLM_API_KEY in its environment, never in argv).
COOKBOOK_VLLM_COMMAND_LINE = (
    "vllm serve Qwen/Qwen3-Coder-Next-FP8 --revision da6e2ed27304dd39abadd9c82ef50e8de67bdd4c"
    " --served-model-name qwen3-coder-next --tensor-parallel-size 2 --max-model-len 262144"
    " --gpu-memory-utilization 0.90 --enable-auto-tool-choice --tool-call-parser qwen3_coder"
    " --port 8000"
).split()


_UNIT_TEXT = """[Unit]
Description=SPEAR inference server (llama-server, started by serve.sh)

[Service]
Type=simple
Slice=system.slice
ExecStart=/opt/spear/bin/serve.sh
Restart=on-failure

[Install]
WantedBy=multi-user.target
"""

_PROD: dict[Token, dict[str, Any]] = {
    tokens.LLAMA_SERVER_BUILD: {
        "source": {"git": "https://github.com/ggml-org/llama.cpp.git",
                   "commit": "aa6192d38defc9a5d9fb2987413f71b18f214270"},
        "cmake_flags": ["-DGGML_CUDA=ON", "-DGGML_NATIVE=OFF"],
        "build_key": "bbf36c4e94bcb4f3",
        "runtime_dir": "/opt/spear",
    },
    tokens.MODEL_FILES: {
        "shards": [{"name": f"Qwen3-Coder-Next-Q8_0-0000{i}-of-00004.gguf", "size": 22469758624.0,
                    "sha256": f"{i}" * 64} for i in range(1, 5)],
        "digest": "93861b3f29027ed9",
        "runtime_dir": "/opt/spear",
    },
    tokens.SERVER_CONF: {
        "path": "/opt/spear/config/server.conf",
        "settings": {
            "SPEAR_SERVER_MODEL": "/opt/spear/models/gguf/Qwen3-Coder-Next-Q8_0-00001-of-00004.gguf",
            "SPEAR_SERVER_LORA": "none", "SPEAR_SERVER_CTX": "524288",
            "SPEAR_SERVER_NATIVE_CTX": "262144", "SPEAR_SERVER_ARCH": "qwen3next",
            "SPEAR_SERVER_HOST": "127.0.0.1", "SPEAR_SERVER_PORT": "8010",
            "SPEAR_SERVER_THREADS": "16", "SPEAR_SERVER_NGL": "99", "SPEAR_SERVER_NCPUMOE": "0",
            "SPEAR_SERVER_MOE": "1", "SPEAR_SERVER_PARALLEL": "1",
        },
        "command_line": SEED_COMMAND_LINE,
        "binds": [{"host": "reds.internal:22", "address": "127.0.0.1", "port": 8010.0,
                   "what": "llama-server"}],
    },
    tokens.SYSTEMD_UNIT: {
        "unit": "spear-inference.service",
        "unit_path": "/etc/systemd/system/spear-inference.service",
        "scope": "system",
        "content": _UNIT_TEXT,
        "slice": "system.slice",
    },
    # A RunPod pod serving the cookbook's model with vLLM (stack key runpod.pods.gpu), once up.
    tokens.RUNPOD_POD: {
        "api_url": "https://rest.runpod.io/v1",
        "api_key": "rpa_PLACEHOLDER",
        "name": "spear-prod-gpu",
        "image_name": "vllm/vllm-openai:v0.24.0",
        "gpu_type_ids": ["NVIDIA H100 80GB HBM3"],
        "gpu_count": 2.0,
        "cloud_type": "SECURE",
        "container_disk_in_gb": 50.0,
        "volume_in_gb": 200.0,
        "ports": ["22/tcp"],
        "env": {"PUBLIC_KEY": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPlaceholder"},
        "pod_id": "xedezhzb9la3ye",
        "ssh_host": "100.65.0.119",
        "ssh_port": 10341.0,
    },
    tokens.POD_VLLM: {
        "pod_id": "xedezhzb9la3ye",
        "endpoint": {"host": "100.65.0.119", "port": 10341.0},
        "runtime_dir": "/workspace/spear",
        "command_line": COOKBOOK_VLLM_COMMAND_LINE,
        "image": "vllm/vllm-openai:v0.24.0",
        "api_key": "vllm-PLACEHOLDER",
        "env_file": {"path": "/workspace/spear/config/vllm.env", "mode": 384.0,
                     "variable": "VLLM_API_KEY"},
        "port": 8000.0,
        "served_model_name": "qwen3-coder-next",
    },
}
# prod's commented gateway example, routing `coder` to the inference host reds (backend reds: 8082).
_GATEWAY = parse_stack(gateway_raw()).gateway
_PROD.update({
    tokens.GATEWAY_CONFIG: {
        "path": "/opt/spear-gateway/config/config.yaml",
        "content": render_config(_GATEWAY, [Route.tunnel(
            "reds", 8082, "/opt/spear/models/gguf/Qwen3-Coder-Next-Q8_0-00001-of-00004.gguf",
            False)]),
        "mode": 420.0,
        "upstreams": ["reds"],
        "litellm_version": "1.91.1",
        "hatch": {"from": "coder", "to": "frontier", "monthly_cap_usd": 200.0, "alert_usd": 150.0},
        "binds": [{"host": "gateway.internal:22", "address": "127.0.0.1", "port": 4000.0,
                   "what": "the LiteLLM gateway"}],
    },
    tokens.GATEWAY_ENV: {
        "path": "/opt/spear-gateway/config/gateway.env",
        "content": render_env({"LITELLM_MASTER_KEY": MASTER_KEY, "FRONTIER_API_KEY": FRONTIER_KEY}),
        "mode": 384.0,
    },
    tokens.TUNNEL_KEY: {"path": "/opt/spear-gateway/tunnels/reds.key", "content": DUMMY_KEY,
                        "mode": 384.0},
    tokens.GATEWAY_TUNNEL: {
        "unit": "spear-tunnel-reds.service",
        "unit_path": "/etc/systemd/system/spear-tunnel-reds.service",
        "slice": "system.slice",
        "health": {"port": 8082.0, "address": "127.0.0.1", "path": "/health",
                   "timeout_seconds": 120.0},
    },
    tokens.GATEWAY_KEY: {
        "address": "127.0.0.1", "port": 4000.0, "master_key": MASTER_KEY, "developer": "ana",
        "key_alias": "ana", "models": ["coder"], "max_budget": 25.0, "budget_duration": "30d",
        "tpm_limit": None, "rpm_limit": None, "max_parallel_requests": None,
        "metadata": {"team": "platform", "developer": "ana"}, "rotation": 0.0,
        "rotation_grace": "24h", "key": "sk-ana-PLACEHOLDER",
    },
})
# What each resource tells the engine to keep secret (HostResource: the connection, and the
# secret inputs its class names).
SECRET_OUTPUTS: dict[Token, list[str]] = {
    tokens.GATEWAY_ENV: ["connection", "content"],
    tokens.TUNNEL_KEY: ["connection", "content"],
    tokens.GATEWAY_KEY: ["connection", "master_key", "key"],
}
# The endpoint components a stack policy sees, as (type, name) (prod's inference host).
PROD_ENDPOINTS = [(tokens.INFERENCE_HOST, "reds")]

_PROD_STACK_OUTPUTS = {"backends": {
    "local": {"name": "local", "kind": "port", "port": 8080.0},
    "remote": {"name": "remote", "kind": "port", "port": 8081.0},
    "reds": {"name": "reds", "kind": "port", "port": 8082.0},
    "anthropic": {"name": "anthropic", "kind": "api", "port": None},
}}


def prod(token: Token) -> dict[str, Any]:
    """A fresh copy of the prod props of one resource type."""
    return copy.deepcopy(_PROD[token])


def prod_stack() -> dict[str, Any]:
    """A fresh copy of the prod root stack's outputs."""
    return copy.deepcopy(_PROD_STACK_OUTPUTS)


def _urn(token: Token, name: str) -> str:
    return f"urn:pulumi:prod::spear-fleet::{tokens.INFERENCE_HOST}${token.type}::{name}"


def defaults(policy: Policy) -> dict[str, Any]:
    """The policy's config as the engine hands it over when nobody set any: the schema defaults."""
    schema = policy.config_schema.properties if policy.config_schema else {}
    return {key: spec["default"] for key, spec in schema.items() if "default" in spec}


def _options(secret_outputs: list[str] | None = None) -> PolicyResourceOptions:
    return PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0),
                                 list(secret_outputs or []))


def check_resource(policy: Policy, token: Token, props: dict[str, Any],
                   config: dict[str, Any] | None = None,
                   secret_outputs: list[str] | None = None) -> list[str]:
    """The messages `policy` reports for one resource of this type with these props (and the
    secret outputs it declares: by default what the program's resource of that type declares)."""
    name = _NAMES.get(token, "other")
    secrets = SECRET_OUTPUTS.get(token, ["connection"]) if secret_outputs is None else secret_outputs
    args = ResourceValidationArgs(token.type, unknown_checking_proxy(props), _urn(token, name),
                                  name, _options(secrets), None,
                                  config if config is not None else defaults(policy))
    reported: list[str] = []
    policy.validate(args, lambda message, urn=None: reported.append(message))
    return reported


def check_stack(policy: Policy, stack_outputs: dict[str, Any],
                resources: list[tuple[Any, ...]],
                components: list[tuple[str, str]] = ()) -> list[str]:
    """The messages a stack policy reports for the root stack (its outputs), these (type, props)
    or (type, props, name) resources and these (component type, name) components (their
    outputs left out)."""
    stack = PolicyResource(tokens.STACK, unknown_checking_proxy(stack_outputs), STACK_URN,
                           "spear-fleet-prod", _options(), None, None, [], {})
    members = []
    for token, props, *named in resources:
        name = named[0] if named else _NAMES[token]
        members.append(PolicyResource(token.type, unknown_checking_proxy(props), _urn(token, name),
                                      name, _options(), None, stack, [], {}))
    members += [PolicyResource(kind, {}, f"urn:pulumi:prod::spear-fleet::{kind}::{name}", name,
                               _options(), None, stack, [], {}) for kind, name in components]
    reported: list[str] = []
    policy.validate(StackValidationArgs([stack, *members], defaults(policy)),
                    lambda message, urn=None: reported.append(message))
    return reported


# ---------------------------------------------------------------------------------------------
# The vLLM fleet on Kubernetes: its objects as a preview shows them (the manifests the component
# hands pulumi-kubernetes, numbers as the engine's JSON floats), for the test fleet of
# tests/support/config_cases.py.


def _floats(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return float(value)
    if isinstance(value, dict):
        return {k: _floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_floats(v) for v in value]
    return value


def kube_objects(**fleet: Any) -> dict[str, tuple[tokens.ProviderType, dict[str, Any]]]:
    """The fleet's objects by resource name, as (type, props), for the test fleet with `fleet`'s
    keys overridden (e.g. canary=...)."""
    from components.vllm_fleet import manifests
    from spear.fleet import CANARY, STABLE
    from tests.support.config_cases import fleet_raw

    cfg = parse_stack(fleet_raw(**fleet)).vllm_fleet
    objects = {
        "vllm-stable": (tokens.K8S_DEPLOYMENT, manifests.deployment(cfg, STABLE, cfg.stable, cfg.replicas)),
        "vllm-rollout": (tokens.K8S_CONFIG_MAP, manifests.rollout_record(cfg)),
        "vllm-tenancy": (tokens.K8S_CONFIG_MAP, manifests.tenancy(cfg)),
        "vllm-agents": (tokens.K8S_NAMESPACE, manifests.sandbox_namespace(cfg.agent_sandbox)),
        "vllm-agents-deny-egress": (tokens.K8S_NETWORK_POLICY, manifests.deny_egress(cfg.agent_sandbox)),
        "vllm-agents-allow-egress": (tokens.K8S_NETWORK_POLICY, manifests.allow_egress(cfg.agent_sandbox)),
    }
    if cfg.canary:
        objects["vllm-canary"] = (tokens.K8S_DEPLOYMENT, manifests.deployment(
            cfg, CANARY, cfg.canary.pair, cfg.canary.replicas))
    return {name: (kind, _floats(props)) for name, (kind, props) in objects.items()}


def seat_objects(**seats: Any) -> dict[str, tuple[tokens.ProviderType, dict[str, Any]]]:
    """The agent seats' objects by resource name, as (type, props), for the test fleet's sandbox
    with `seats` (tests/support/config_cases.py::seats_raw; default ana's Codex seat)."""
    from components.agent_seats import manifests
    from components.gateway.render import coder_window
    from tests.support.config_cases import SEATS_GATEWAY_URL, seats_raw

    cfg = parse_stack(seats_raw(**seats))
    sandbox = cfg.vllm_fleet.agent_sandbox
    trust = manifests.GatewayTrust.of(cfg.gateway)
    objects: dict[str, tuple[tokens.ProviderType, dict[str, Any]]] = {
        "seat-gateway-ca": (tokens.K8S_CONFIG_MAP, manifests.ca_config_map(sandbox, trust))}
    for seat in sandbox.seats.values():
        entry = manifests.wiring(seat, SEATS_GATEWAY_URL, cfg.harnesses, coder_window(cfg))
        name = manifests.name(seat)
        objects[f"{name}-key"] = (tokens.K8S_SECRET, {**manifests.key_secret(sandbox, seat),
                                                      "stringData": {manifests.KEY_FIELD: "sk-ana-VIRTUAL"}})
        config_map = manifests.wiring_config_map(sandbox, seat, entry)
        if config_map:
            objects[f"{name}-wiring"] = (tokens.K8S_CONFIG_MAP, config_map)
        objects[name] = (tokens.K8S_DEPLOYMENT, manifests.deployment(sandbox, seat, entry, trust))
    return {name: (kind, _floats(props)) for name, (kind, props) in objects.items()}


def kube_stack(objects: dict[str, tuple[tokens.ProviderType, dict[str, Any]]]) -> list[tuple[Any, ...]]:
    """check_stack's resources for these objects."""
    return [(kind, props, name) for name, (kind, props) in objects.items()]


def stable_container(objects: dict[str, tuple[tokens.ProviderType, dict[str, Any]]]) -> dict[str, Any]:
    """The vLLM container of the stable Deployment in `objects`, to change in place."""
    return objects["vllm-stable"][1]["spec"]["template"]["spec"]["containers"][0]
