"""`parse`: the `spear-fleet` config namespace in, the typed FleetConfig out, or one ConfigError
listing every problem. Pure: plain Python values in (keys without the `spear-fleet:` prefix,
objects as dicts, and the bytes of the files the stack names, which config/load.py reads), so a
bad stack is refused before a single resource is registered.

One module per top-level concern names its top-level keys (OPTIONS) and types them; the keys
under them are declared on the typed values of config/types.py (config/options.py::opt), what
the sections share comes from `common`, and the rules across sections from `across`.
From the declarations come the key lists here, the stack files' JSON Schema
(scripts/stack-schema) and the keys `stacks/Pulumi.prod.yaml` must document
(tests/unit/test_stack_doc.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from config.checker import Checker, get, map_names
from config.options import Obj, is_object, stack_schema
from config.schema import (across, backends, developers, gateway, harnesses, hosts, reds, runpod,
                           vllm_fleet)
from config.types import API_KEY_NAMES, GATEWAY_MASTER_KEY, VLLM_API_KEY, FleetConfig
from spear import receipts, rollout_gate
from spear.rules import FLEET_UPSTREAM

STACK = Obj({**backends.OPTIONS, **hosts.OPTIONS, **runpod.OPTIONS, **reds.OPTIONS,
             **gateway.OPTIONS, **developers.OPTIONS, **harnesses.OPTIONS, **vllm_fleet.OPTIONS})
TOP_KEYS = tuple(STACK.fields)
# Keys whose value is an object (the loader reads them as JSON).
OBJECT_KEYS = tuple(name for name, opt in STACK.fields.items() if is_object(opt.kind))
# The stack files' JSON Schema (scripts/stack-schema writes it), which each names for editors.
SCHEMA_FILE = "stacks/spear-fleet.schema.json"


def schema_text() -> str:
    """The JSON Schema of the stack files, as committed."""
    return json.dumps(stack_schema(STACK), indent=1) + "\n"


def parse(raw: Mapping[str, Any], deployed_rollout: Any = None,
          files: Mapping[str, bytes | str] | None = None) -> FleetConfig:
    """Check the whole namespace and type it; ConfigError lists every problem.
    `deployed_rollout`: the fleet's (stable, previous) pairs as last deployed; `files`: what the
    files the stack names hold (both read by config.load)."""
    check = Checker(files)
    for unknown in sorted(set(raw) - set(TOP_KEYS)):
        check.report(unknown, "an unknown key", "one of " + ", ".join(TOP_KEYS))
    backend_table = backends.parse(check, get(raw, "backends"))
    host_names = map_names(get(raw, "inferenceHosts"))
    pod_names = runpod.pod_names(get(raw, "runpod"))
    endpoint_names = map_names(get(raw, "redsEndpoints"))
    gateway_names = [gateway.declared_name(get(raw, "gateway"))]
    inference_hosts = hosts.parse(check, get(raw, "inferenceHosts"), get(raw, "sshPrivateKeys"),
                                  backend_table,
                                  {"pods": pod_names, "REDS endpoints": endpoint_names,
                                   "the gateway": [n for n in gateway_names if n]})
    runpod_pods, api_keys = runpod.parse(
        check, get(raw, "runpod"), {name: get(raw, name) for name in API_KEY_NAMES},
        get(raw, "sshPrivateKeys"), backend_table, inference_hosts,
        also_needed_by={VLLM_API_KEY: "vllmFleet"} if "vllmFleet" in raw else None)
    reds_endpoints = reds.parse(check, get(raw, "redsEndpoints"), get(raw, "sshPrivateKeys"),
                                backend_table, inference_hosts, host_names,
                                other_names=[*host_names, *pod_names])
    backends.check_one_server_per_tunnel(check, inference_hosts, [
        *((f"runpod.pods.{name}", pod.backend, f"runpod.pods.{name}")
          for name, pod in runpod_pods.items()),
        *((f"redsEndpoints.{name}", endpoint.backend, endpoint.server)
          for name, endpoint in reds_endpoints.items())])
    the_gateway, gateway_keys = gateway.parse(
        check, get(raw, "gateway"), {name: get(raw, name) for name in (*gateway.SECRET_NAMES,
                                                                      *gateway.TLS_SECRETS)},
        get(raw, "sshPrivateKeys"), endpoint_names=[*host_names, *pod_names, *endpoint_names,
                                                    *([FLEET_UPSTREAM] if "vllmFleet" in raw else [])],
        taken_names=[*host_names, *pod_names, *endpoint_names],
        keyless=[name for name, endpoint in reds_endpoints.items() if endpoint.ssh.key is None])
    master_key = gateway_keys.get(GATEWAY_MASTER_KEY)
    harness_versions = harnesses.parse(check, get(raw, "harnesses"))
    fleet = vllm_fleet.parse(check, get(raw, "vllmFleet"), get(raw, "kubeconfig"), deployed_rollout,
                             developers=map_names(get(raw, "developers")),
                             receipt_key=receipts.receipt_key(master_key.text) if master_key else None,
                             served_with=rollout_gate.ServedWith(
                                 the_gateway.litellm_version if the_gateway else None,
                                 tuple(sorted(harness_versions.items())),
                                 rollout_gate.registry_digest()))
    cfg = FleetConfig(inference_hosts=inference_hosts, backends=backend_table,
                      runpod_pods=runpod_pods, api_keys={**api_keys, **gateway_keys},
                      reds_endpoints=reds_endpoints, gateway=the_gateway,
                      developers=developers.parse(check, get(raw, "developers")),
                      harnesses=harness_versions, vllm_fleet=fleet)
    for rule in across.RULES:
        rule(check, cfg, raw)
    check.raise_if_any()
    return across.with_gateway_peers(cfg)
