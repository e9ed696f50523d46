"""`parse`: the `spear-fleet` config namespace in, the typed FleetConfig out, or one ConfigError
listing every problem. Pure: plain Python values in (keys without the `spear-fleet:` prefix,
objects as dicts), so a bad stack is refused before a single resource is registered.

One module per top-level concern; each names its keys in KEYS, and takes what it shares with
the others from `common`. The keys are documented in `stacks/Pulumi.prod.yaml`
(tests/unit/test_stack_doc.py holds the two to each other).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from config.checker import MISSING, Checker, get, map_names
from config.schema import backends, developers, gateway, harnesses, hosts, reds, runpod, vllm_fleet
from config.types import (API_KEY_NAMES, GATEWAY_MASTER_KEY, VLLM_API_KEY, AgentSandbox, EgressTarget,
                          FleetConfig, Gateway, VllmFleet)
from spear import receipts
from spear.fleet import CANARY, STABLE
from spear.rules import FLEET_UPSTREAM, GATEWAY_POD_LABELS, GENERAL_RING, PILOT_RING, STABLE_RING

TOP_KEYS = (backends.KEYS + hosts.KEYS + runpod.KEYS + reds.KEYS + gateway.KEYS
            + developers.KEYS + harnesses.KEYS + vllm_fleet.KEYS)
# Keys whose value is an object (the loader reads them as JSON).
OBJECT_KEYS = (backends.KEYS + hosts.KEYS + runpod.OBJECT_KEYS + reds.KEYS + gateway.OBJECT_KEYS
               + developers.KEYS + harnesses.KEYS + vllm_fleet.OBJECT_KEYS)


def parse(raw: Mapping[str, Any], deployed_rollout: Any = None) -> FleetConfig:
    """Check the whole namespace and type it; ConfigError lists every problem.
    `deployed_rollout`: the fleet's (stable, previous) pairs as last deployed (config.load)."""
    check = Checker()
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
    the_developers = developers.parse(check, get(raw, "developers"),
                                      has_gateway=get(raw, "gateway") is not MISSING)
    harness_versions = harnesses.parse(check, get(raw, "harnesses"),
                                       has_gateway=get(raw, "gateway") is not MISSING)
    master_key = gateway_keys.get(GATEWAY_MASTER_KEY)
    fleet = vllm_fleet.parse(check, get(raw, "vllmFleet"), get(raw, "kubeconfig"), deployed_rollout,
                             developers=map_names(get(raw, "developers")),
                             has_gateway=get(raw, "gateway") is not MISSING,
                             receipt_key=receipts.receipt_key(master_key.text) if master_key else None)
    if the_gateway and fleet and FLEET_UPSTREAM in the_gateway.upstreams and not fleet.service_ips:
        check.report("vllmFleet.serviceIPs", "nothing", "each track's Service IP (stable, and canary"
                     " with a canary), required while gateway.coder.upstreams names vllmFleet:"
                     " the gateway's routes to the fleet are then known at preview")
    if fleet:
        fleet = _fleet_ingress(check, the_gateway, fleet)
    if fleet and fleet.agent_sandbox:
        fleet = dataclasses.replace(fleet, agent_sandbox=dataclasses.replace(
            fleet.agent_sandbox, gateway=_sandbox_gateway(check, the_gateway, fleet.agent_sandbox)))
    if the_developers:
        _check_stable_ring(check, the_developers, the_gateway)
    if fleet and fleet.gate:
        _check_gate_keys(check, fleet.gate.keys, the_developers)
    check.raise_if_any()
    return FleetConfig(inference_hosts=inference_hosts, backends=backend_table,
                       runpod_pods=runpod_pods, api_keys={**api_keys, **gateway_keys},
                       reds_endpoints=reds_endpoints, gateway=the_gateway,
                       developers=the_developers, harnesses=harness_versions,
                       vllm_fleet=fleet)


def _sandbox_gateway(check: Checker, the_gateway: Gateway | None,
                     sandbox: AgentSandbox) -> EgressTarget | None:
    """Where the agent sandbox reaches the gateway, from the gateway's own settings (typed once):
    its pods on their port in the cluster, or a gateway host's TLS listener. None when the
    gateway serves only loopback, which no pod reaches; seats then have no way to it."""
    if the_gateway is None:
        return None
    cluster, listener = the_gateway.kubernetes, the_gateway.tls_listener
    if cluster is None:
        if sandbox.seats and listener is None:
            # Plain HTTP only on loopback: a seat's requests carry its developer's key.
            check.report("gateway.listen.tls", "nothing", "the gateway host's TLS listener,"
                         " required with agent seats: a seat reaches the gateway by name over"
                         " TLS (gateway.listen.tls.name, .address, .port, gatewayTlsCertificate,"
                         " gatewayTlsKey); its loopback HTTP reaches no pod")
        return listener and EgressTarget("gateway", f"{listener.address}/32", (listener.port,))
    if sandbox.seats and cluster.tls is None:
        check.report("gateway.kubernetes.tls", "nothing", "the gateway's TLS name and"
                     " certificate, required with agent seats: a seat reaches the gateway by"
                     " name over TLS (gateway.kubernetes.tls.name, gatewayTlsCertificate,"
                     " gatewayTlsKey)")
    if sandbox.seats and cluster.service_ip is None:
        check.report("gateway.kubernetes.serviceIP", "nothing", "the gateway Service's fixed"
                     " cluster IP, required with agent seats: the sandbox has no DNS, so a"
                     " seat resolves the gateway's TLS name to that address")
    return EgressTarget("gateway", None, (the_gateway.port,),
                        pods=(cluster.namespace, tuple(sorted(GATEWAY_POD_LABELS.items()))))


def _fleet_ingress(check: Checker, the_gateway: Gateway | None, fleet: VllmFleet) -> VllmFleet:
    """Who reaches the vLLM pods (their ingress NetworkPolicy): the in-cluster gateway's pods,
    taken from `gateway`; what runs outside the pods (a gateway host routing to the fleet, the
    bundled Prometheus on the node's network) only by an address `ingressFrom` names."""
    outside = []
    if the_gateway and the_gateway.kubernetes is None and FLEET_UPSTREAM in the_gateway.upstreams:
        outside.append("the gateway host (gateway.coder.upstreams names vllmFleet)")
    if fleet.prometheus.mode == "bundled":
        outside.append("the bundled Prometheus, on the node's network")
    if outside and not fleet.ingress_from:
        check.report("vllmFleet.ingressFrom", "nothing", "the addresses the vLLM pods see "
                     + " and ".join(outside) + " connect from, as one host or one subnet each:"
                     " only the gateway and the scraper reach the fleet (its ingress"
                     " NetworkPolicy), and an address not named is refused")
    cluster = the_gateway.kubernetes if the_gateway else None
    return dataclasses.replace(fleet, gateway_pods=None if cluster is None else (
        cluster.namespace, tuple(sorted(GATEWAY_POD_LABELS.items()))))


def _check_gate_keys(check: Checker, keys: Mapping[str, str], people: Mapping[str, Any]) -> None:
    """The gate's keys are developers of the stack, in the rings that reach their tracks."""
    for track, ring in ((STABLE, STABLE_RING), (CANARY, PILOT_RING)):
        name = keys.get(track)
        if name is None:
            continue
        if name not in people:
            check.fail(f"vllmFleet.rolloutGate.keys.{track}", name,
                       "a developer of the stack (one of " + ", ".join(sorted(people)) + ")")
        elif people[name].ring != ring:
            check.fail(f"vllmFleet.rolloutGate.keys.{track}", name,
                       f"a developer in the {ring} ring (the ring the gateway serves from the"
                       f" {track} track alone, so the gate measures the pair its record pins)")


def _check_stable_ring(check: Checker, people: Mapping[str, Any], the_gateway: Gateway | None) -> None:
    """A key in the stable ring is served by the fleet's stable track alone: `coder` must route to
    the fleet, or the key reaches nothing."""
    if the_gateway is not None and FLEET_UPSTREAM in the_gateway.upstreams:
        return
    for name, person in sorted(people.items()):
        if person.ring == STABLE_RING:
            check.fail(f"developers.{name}.ring", STABLE_RING,
                       f"{PILOT_RING} or {GENERAL_RING}: the {STABLE_RING} ring is served by the"
                       f" fleet's stable track alone, and gateway.coder.upstreams does not name"
                       f" {FLEET_UPSTREAM}")
