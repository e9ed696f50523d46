"""The gateway (seed 001 steps 5-6): LiteLLM between every developer and the fleet, with
PostgreSQL for keys and spend, in one of two placements the typed config chooses
(`Gateway.placement`): on a host spear-fleet logs in to (host.py) or as a Deployment in the
fleet's cluster (cluster.py). Each placement module has the same shape: a component taking
`GatewayArgs` (access.py, with what both share) that leaves `access`, `harnesses`, `pod_url` and
`outputs`, and `metrics_target(config)`, where the fleet's Prometheus reads its /metrics/. So the
program composes a gateway without asking where it runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pulumi

from components.gateway import cluster, host
from components.gateway.access import DeveloperAccess, FleetRoutes, GatewayArgs, HarnessPins
from components.vllm_fleet.monitoring import GatewayTarget
from config.types import Gateway as GatewayConfig

__all__ = ["DeveloperAccess", "FleetRoutes", "GatewayArgs", "HarnessPins", "Placement",
           "PLACEMENTS", "metrics_target", "place_gateway"]


@dataclass(frozen=True)
class Placement:
    component: Callable[..., host.HostGateway | cluster.ClusterGateway]
    metrics_target: Callable[[GatewayConfig], GatewayTarget]


PLACEMENTS = {
    "host": Placement(host.HostGateway, host.metrics_target),
    "kubernetes": Placement(cluster.ClusterGateway, cluster.metrics_target),
}


def place_gateway(name: str, args: GatewayArgs, opts: pulumi.ResourceOptions | None = None
            ) -> host.HostGateway | cluster.ClusterGateway:
    """The gateway in the placement its config names."""
    return PLACEMENTS[args.config.placement].component(name, args, opts)


def metrics_target(config: GatewayConfig) -> GatewayTarget:
    """Where the fleet's Prometheus reads the gateway's /metrics/, wherever it runs."""
    return PLACEMENTS[config.placement].metrics_target(config)
