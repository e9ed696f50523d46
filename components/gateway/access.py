"""What both placements of the gateway share (components/gateway/__init__.py): their arguments,
the fleet as an upstream, the stack's harness pins, and each developer's key, smoke test and
harness wiring."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.endpoints import Endpoint
from components.gateway.keys import GatewayKey, GatewayKeyArgs
from components.gateway.render import FLEET_API_ENV, Route, upstream_key_env
from components.hostops.smoke_test import SmokeTest, SmokeTestArgs
from components.vllm_fleet import Track
from config.types import Developer
from config.types import Gateway as GatewayConfig
from review.kinds import IN_PLACE, Kind
from spear import harness, tokens
from spear.rules import CODER_MODEL, ring_routes

KIND = Kind.of(tokens.GATEWAY_SMOKE_TEST, "gateway smoke test", IN_PLACE, meanings={
    IN_PLACE: "asks coder for SPEAR-BACKEND-OK through the gateway again"})


class GatewaySmokeTest(SmokeTest, module=tokens.DYNAMIC_MODULE,
                       name=tokens.GATEWAY_SMOKE_TEST.name):
    """The seed's smoke test asked of `coder` through the gateway, with a developer's key."""


def fleet_route(track: str) -> str:
    return f"vllm-{track}"


@dataclass
class FleetRoutes:
    """The Kubernetes fleet as `coder`'s upstream: a route per track, at its Service; and its
    cluster, where the in-cluster placement runs."""
    tracks: list[Track]
    api_key: pulumi.Input[str]  # secret: what vLLM demands
    priority: bool  # vLLM schedules by priority: the hook stamps `priority`
    cache_salt_scope: str  # team or developer (vllmFleet.tenancy.cacheSalt)
    provider: k8s.Provider  # the fleet's cluster
    cluster: pulumi.Input[dict]  # secret: kube_api.cluster_access(...), for the checks
    # prefix-affinity (gateway.coder.fleetRouting): the API server, its CA and the token that
    # reads the tracks' EndpointSlices (VllmFleet.router, a secret); None: the Services pick.
    router: pulumi.Output[dict[str, str]] | None = None

    def routes(self) -> list[pulumi.Output[Route]]:
        return [pulumi.Output.from_input(track.address).apply(
            lambda address, t=track: Route(
                fleet_route(t.name), f"http://{address}:{t.port}/v1", t.served_model, True,
                track=t.name, cache_salt=True, priority=self.priority,
                pods=(*t.service, t.port) if self.router is not None else None))
            for track in self.tracks]

    def environment(self) -> dict[str, pulumi.Input[str]]:
        """The gateway's env for the fleet: each route's key (render.upstream_key_env) -> vLLM's
        key, and with prefix affinity where its pods are listed from (render.FLEET_API_ENV)."""
        env: dict[str, pulumi.Input[str]] = {
            upstream_key_env(fleet_route(t.name)): self.api_key for t in self.tracks}
        if self.router is not None:
            env.update({name: self.router.apply(lambda r, part=part: r[part])
                        for part, name in FLEET_API_ENV.items()})
        return env

    def route_tracks(self) -> dict[str, str]:
        """Route -> track, for the rings (spear.rules.ring_routes)."""
        return {fleet_route(t.name): t.name for t in self.tracks}


@dataclass(frozen=True)
class HarnessPins:
    """What every developer's harness wiring carries besides the key: the stack's harness
    versions and what `coder` serves (render.coder_window)."""
    versions: dict[str, str]
    window: harness.Window | None


@dataclass
class DeveloperAccess:
    """What each developer leaves `up` with: a key on the gateway, and the seed's smoke test
    through the gateway with it, asked until every route of the key's ring answered."""
    keys: dict[str, GatewayKey]
    smoke_tests: dict[str, GatewaySmokeTest]
    harnesses: dict[str, pulumi.Output]
    pins: HarnessPins

    @classmethod
    def make(cls, parent: pulumi.Resource, name: str, *, vantage: dict[str, Any], address: str,
             port: int, url: str, master_key: pulumi.Input[str], database: pulumi.Input[str],
             developers: dict[str, Developer], route_tracks: dict[str, str | None],
             harnesses: HarnessPins, started_at: pulumi.Input[Any],
             after: list[pulumi.Resource], root_pem: str | None = None) -> DeveloperAccess:
        """`vantage`: {"connection": the gateway host's login} or {"cluster": its Service's};
        `root_pem`: the root a TLS gateway's certificate chains to, which developers' harnesses
        are told to trust."""
        keys = {dev: GatewayKey(f"{name}-key-{dev}", GatewayKeyArgs(
            **vantage, address=address, port=port, master_key=master_key, developer=developer,
            database=database,
        ), pulumi.ResourceOptions(parent=parent, depends_on=after))
            for dev, developer in developers.items()}
        smoke_tests = {dev: GatewaySmokeTest(f"{name}-smoke-{dev}", SmokeTestArgs(
            **vantage, port=port, address=address, model=CODER_MODEL, api_key=key.key,
            triggers={"started_at": started_at},
            routes=ring_routes(developers[dev].ring, route_tracks),
        ), pulumi.ResourceOptions(parent=parent, depends_on=[key])) for dev, key in keys.items()}
        wiring = {dev: pulumi.Output.secret(key.key).apply(
            lambda k: harness.wiring(url, k, CODER_MODEL, harnesses.versions, harnesses.window,
                                     harness.DEVELOPER_CA_FILE if root_pem else None, root_pem))
            for dev, key in keys.items()}
        return cls(keys, smoke_tests, wiring, harnesses)

    def outputs(self) -> dict[str, Any]:
        return {
            "smoke_tests": {dev: test.summary for dev, test in self.smoke_tests.items()},
            "served_by": {dev: test.served_by for dev, test in self.smoke_tests.items()},
            "keys": {dev: {"spend": key.spend, "budget_reset_at": key.budget_reset_at}
                     for dev, key in self.keys.items()},
            # In clear (the wiring itself is a secret): a bump shows in the preview.
            "harness_versions": self.pins.versions,
            "served_window": dataclasses.asdict(self.pins.window) if self.pins.window else None,
        }


@dataclass
class GatewayArgs:
    """One set of arguments for either placement; each reads its own (the config check makes
    sure a gateway host has its SSH key and an in-cluster gateway the fleet as its upstream)."""
    config: GatewayConfig
    master_key: pulumi.Input[str]  # secret
    frontier_api_key: pulumi.Input[str]  # secret
    database_url: pulumi.Input[str] | None  # secret; None with a gateway host's local database
    developers: dict[str, Developer]  # one virtual key each
    harnesses: HarnessPins
    fleet: FleetRoutes | None = None  # when gateway.coder.upstreams names vllmFleet
    # gateway.listen.tls's or gateway.kubernetes.tls's certificate bundle and key (secrets).
    tls_certificate: pulumi.Input[str] | None = None
    tls_key: pulumi.Input[str] | None = None
    backup_key: pulumi.Input[str] | None = None  # gatewayBackupKey, secret: with a backup
    # A gateway host's: its SSH key (secret), and the endpoints `coder` routes to by name, in
    # `coder`'s order (each backend's client port is its tunnel's local end on the host).
    private_key: pulumi.Input[str] | None = None
    upstreams: dict[str, Endpoint] = field(default_factory=dict)
