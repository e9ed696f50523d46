"""Rules across sections: named functions over the typed config, as far as it parsed, each
asking spear/ where a rule of the domain decides. `parse` runs every one of RULES after the
sections, so their problems come with the sections' own, all at once.

A name one section gives of another's (a port backend, an inference host, a seat's developer) is
a reference: its section resolves it while typing, against the names the other declares. What
is here judges typed values of two or more sections together."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from config.checker import Checker
from config.types import AgentSandbox, EgressTarget, FleetConfig
from spear.fleet import STABLE
from spear.harness import seat_image_problem
from spear.rules import (FLEET_UPSTREAM, GATEWAY_POD_LABELS, PILOT_RING, STABLE_RING, ring_routes,
                         served_by_track_alone)

# The stack's config as far as it parsed, and the namespace as given: what it declares, parsed
# or not (a section with problems of its own is declared, not absent).
Rule = Callable[[Checker, FleetConfig, Mapping[str, Any]], None]


def _member(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, Mapping) else None


def gateway_first(check: Checker, cfg: FleetConfig, raw: Mapping[str, Any]) -> None:
    """Developers' keys, harness versions and seats live on the gateway."""
    if "gateway" in raw:
        return
    if "developers" in raw:
        check.report("developers", "developers without a gateway",
                     "developers only with `gateway` (their keys live there)")
    if "harnesses" in raw:
        check.report("harnesses", "harness versions without a gateway",
                     "harnesses only with `gateway` (the harnesses are wired to it)")
    sandbox = _member(_member(raw, "vllmFleet"), "agentSandbox")
    if _member(sandbox, "seats"):
        check.report("vllmFleet.agentSandbox.seats", "seats without a gateway", "seats only with"
                     " `gateway` (each seat's harness reaches coder through it with its"
                     " developer's virtual key)")


def every_ring_is_served(check: Checker, cfg: FleetConfig, raw: Mapping[str, Any]) -> None:
    """Each developer's ring reaches some route of `coder` (spear/rules.py::ring_routes): the
    stable ring is the fleet's stable track alone, so it needs `coder` to route to the fleet."""
    if cfg.gateway is None:
        return
    tracks = {name: STABLE if name == FLEET_UPSTREAM else None for name in cfg.gateway.upstreams}
    for name, person in sorted(cfg.developers.items()):
        if not ring_routes(person.ring, tracks):
            check.fail(f"developers.{name}.ring", person.ring,
                       f"{PILOT_RING} or general: the {STABLE_RING} ring is served by the"
                       f" fleet's stable track alone, and gateway.coder.upstreams does not name"
                       f" {FLEET_UPSTREAM}")


def gate_keys_measure_their_tracks(check: Checker, cfg: FleetConfig,
                                   raw: Mapping[str, Any]) -> None:
    """The gate's keys are developers of the stack, each in a ring its track alone serves
    (spear/rules.py::served_by_track_alone)."""
    gate = cfg.vllm_fleet and cfg.vllm_fleet.gate
    for track, name in sorted((gate.keys if gate else {}).items()):
        key = f"vllmFleet.rolloutGate.keys.{track}"
        person = cfg.developers.get(name)
        if person is None:
            check.fail(key, name, "a developer of the stack (one of "
                       + ", ".join(sorted(cfg.developers)) + ")")
        elif not served_by_track_alone(person.ring, track):
            ring = STABLE_RING if track == STABLE else PILOT_RING
            check.fail(key, name, f"a developer in the {ring} ring (the ring the gateway serves"
                       f" from the {track} track alone, so the gate measures the pair its record"
                       " pins)")


def fleet_routes_known_at_preview(check: Checker, cfg: FleetConfig,
                                  raw: Mapping[str, Any]) -> None:
    """A gateway routing `coder` to the fleet reaches each track's Service at a fixed IP."""
    fleet = cfg.vllm_fleet
    if cfg.gateway and fleet and cfg.gateway.routes_fleet and not fleet.service_ips:
        check.report("vllmFleet.serviceIPs", "nothing", "each track's Service IP (stable, and canary"
                     " with a canary), required while gateway.coder.upstreams names vllmFleet:"
                     " the gateway's routes to the fleet are then known at preview")


def fleet_callers_named(check: Checker, cfg: FleetConfig, raw: Mapping[str, Any]) -> None:
    """What reaches the vLLM pods from outside the pods (a gateway host routing to the fleet,
    the bundled Prometheus on the node's network) does so only from an address `ingressFrom`
    names: only the gateway and the scraper reach the fleet (its ingress NetworkPolicy)."""
    fleet, gateway = cfg.vllm_fleet, cfg.gateway
    if fleet is None or fleet.ingress_from:
        return
    outside = []
    if gateway and gateway.kubernetes is None and gateway.routes_fleet:
        outside.append("the gateway host (gateway.coder.upstreams names vllmFleet)")
    if fleet.prometheus.mode == "bundled":
        outside.append("the bundled Prometheus, on the node's network")
    if outside:
        check.report("vllmFleet.ingressFrom", "nothing", "the addresses the vLLM pods see "
                     + " and ".join(outside) + " connect from, as one host or one subnet each:"
                     " only the gateway and the scraper reach the fleet (its ingress"
                     " NetworkPolicy), and an address not named is refused")


def seats_reach_the_gateway_by_name(check: Checker, cfg: FleetConfig,
                                    raw: Mapping[str, Any]) -> None:
    """A seat reaches the gateway by name over TLS (its requests carry its developer's key; plain
    HTTP stays on loopback): a gateway host's TLS listener, or in the cluster the gateway's TLS
    name and the Service's fixed IP (the sandbox has no DNS)."""
    sandbox = cfg.vllm_fleet and cfg.vllm_fleet.agent_sandbox
    if not (sandbox and sandbox.seats and cfg.gateway):
        return
    cluster = cfg.gateway.kubernetes
    if cluster is None and cfg.gateway.tls_listener is None:
        check.report("gateway.listen.tls", "nothing", "the gateway host's TLS listener,"
                     " required with agent seats: a seat reaches the gateway by name over"
                     " TLS (gateway.listen.tls.name, .address, .port, gatewayTlsCertificate,"
                     " gatewayTlsKey); its loopback HTTP reaches no pod")
    if cluster is not None and cluster.tls is None:
        check.report("gateway.kubernetes.tls", "nothing", "the gateway's TLS name and"
                     " certificate, required with agent seats: a seat reaches the gateway by"
                     " name over TLS (gateway.kubernetes.tls.name, gatewayTlsCertificate,"
                     " gatewayTlsKey)")
    if cluster is not None and cluster.service_ip is None:
        check.report("gateway.kubernetes.serviceIP", "nothing", "the gateway Service's fixed"
                     " cluster IP, required with agent seats: the sandbox has no DNS, so a"
                     " seat resolves the gateway's TLS name to that address")


def seat_image_holds_the_pinned_harnesses(check: Checker, cfg: FleetConfig,
                                          raw: Mapping[str, Any]) -> None:
    """The seat image, where its tag says which harness versions it holds (the recipe's), holds
    those `harnesses` pins (spear/harness.py::seat_image_problem)."""
    sandbox = cfg.vllm_fleet and cfg.vllm_fleet.agent_sandbox
    if not (sandbox and sandbox.seats and sandbox.seat_image):
        return
    problem = seat_image_problem(sandbox.seat_image, cfg.harnesses)
    if problem:
        check.report("vllmFleet.agentSandbox.seatImage", f"{sandbox.seat_image} ({problem})",
                     "the seat image built for the versions `harnesses` pins (scripts/up-local"
                     " builds the local stack's; localhosts/images/seat_image.py), or `harnesses`"
                     " at the versions the image holds")


RULES: tuple[Rule, ...] = (gateway_first, every_ring_is_served, gate_keys_measure_their_tracks,
                           fleet_routes_known_at_preview, fleet_callers_named,
                           seats_reach_the_gateway_by_name, seat_image_holds_the_pinned_harnesses)


def with_gateway_peers(cfg: FleetConfig) -> FleetConfig:
    """The fleet's ways to and from the gateway, taken from `gateway` (typed once): who the vLLM
    pods admit (the in-cluster gateway's pods) and where seats reach it (its pods on their
    port, or a gateway host's TLS listener; none when it serves only loopback, which no pod
    reaches)."""
    fleet, gateway = cfg.vllm_fleet, cfg.gateway
    if fleet is None:
        return cfg
    cluster = gateway.kubernetes if gateway else None
    pods = None if cluster is None else (cluster.namespace,
                                         tuple(sorted(GATEWAY_POD_LABELS.items())))
    sandbox: AgentSandbox | None = fleet.agent_sandbox
    if sandbox and gateway:
        listener = gateway.tls_listener
        way = (EgressTarget("gateway", None, (gateway.port,), pods=pods) if cluster
               else listener and EgressTarget("gateway", f"{listener.address}/32",
                                              (listener.port,)))
        sandbox = dataclasses.replace(sandbox, gateway=way)
    return dataclasses.replace(cfg, vllm_fleet=dataclasses.replace(
        fleet, gateway_pods=pods, agent_sandbox=sandbox))
