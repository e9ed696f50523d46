"""spear-fleet: typed stack config in, components out, stack outputs exported."""

import dataclasses

import pulumi

from components import registrations
from components.agent_seats import AgentSeats, AgentSeatsArgs
from components.agent_seats.manifests import GatewayTrust
from components.endpoints import Endpoint
from components.endpoints.reds import RedsEndpoint, RedsEndpointArgs
from components.endpoints.runpod_endpoint import RunPodEndpoint, RunPodEndpointArgs
from components.gateway import FleetRoutes, GatewayArgs, HarnessPins, metrics_target, place_gateway
from components.gateway.render import coder_window
from components.inference_host import InferenceHost, InferenceHostArgs
from components.vllm_fleet import VllmFleet, VllmFleetArgs
from config.load import load
from config.types import (FRONTIER_API_KEY, GATEWAY_BACKUP_KEY, GATEWAY_DATABASE_URL,
                          GATEWAY_MASTER_KEY, GATEWAY_TLS_CERTIFICATE, GATEWAY_TLS_KEY,
                          RUNPOD_API_KEY, VLLM_API_KEY)
from spear.rules import FLEET_UPSTREAM

stack = load()

inference_hosts = {
    name: InferenceHost(name, InferenceHostArgs(config=host, private_key=stack.ssh_keys[name]))
    for name, host in stack.config.inference_hosts.items()
}

runpod_pods = {
    name: RunPodEndpoint(name, RunPodEndpointArgs(
        config=pod, private_key=stack.ssh_keys[name],
        runpod_api_key=stack.api_keys[RUNPOD_API_KEY], vllm_api_key=stack.api_keys[VLLM_API_KEY]))
    for name, pod in stack.config.runpod_pods.items()
}

# After the inference hosts: an endpoint on a managed host depends on it.
reds_endpoints = {
    name: RedsEndpoint(name, RedsEndpointArgs(
        config=endpoint, private_key=stack.ssh_keys.get(name),
        inference_host=inference_hosts[endpoint.inference_host] if endpoint.inference_host else None))
    for name, endpoint in stack.config.reds_endpoints.items()
}

cfg = stack.config
# The vLLM fleet on Kubernetes, when the stack declares one.
fleet = None if cfg.vllm_fleet is None else VllmFleet("vllm", VllmFleetArgs(
    config=cfg.vllm_fleet, api_key=stack.api_keys[VLLM_API_KEY], kubeconfig=stack.kubeconfig,
    hatch=cfg.gateway.hatch if cfg.gateway else None,
    request_timeout=cfg.gateway.request_timeout if cfg.gateway else None,
    gateway=metrics_target(cfg.gateway) if cfg.gateway else None,
    gateway_key=stack.api_keys[GATEWAY_MASTER_KEY] if cfg.gateway else None,
    pod_router=bool(cfg.gateway and cfg.gateway.picks_fleet_pods)))

# The gateway routes `coder` to the endpoints it names, each through a tunnel at its backend's
# client port on a gateway host, and to the fleet's tracks at their Services; in the fleet's
# cluster (gateway.kubernetes) to the fleet only (the config check). Endpoint names are unique
# across the families (the config check). Its placement is the config's, not this program's.
endpoints: dict[str, Endpoint] = {**inference_hosts, **runpod_pods, **reds_endpoints}
gateway_cfg = cfg.gateway
fleet_routes = FleetRoutes(tracks=fleet.tracks, api_key=stack.api_keys[VLLM_API_KEY],
                           priority=cfg.vllm_fleet.vllm.scheduling_priority,
                           cache_salt_scope=cfg.vllm_fleet.cache_salt,
                           provider=fleet.provider, cluster=fleet.cluster,
                           router=fleet.router) \
    if fleet is not None and gateway_cfg and gateway_cfg.routes_fleet else None
# Every developer's wiring: the stack's harness versions, and the window coder serves.
harnesses = HarnessPins(cfg.harnesses, coder_window(cfg))
gateway = None if gateway_cfg is None else place_gateway(gateway_cfg.name, GatewayArgs(
    config=gateway_cfg,
    master_key=stack.api_keys[GATEWAY_MASTER_KEY],
    frontier_api_key=stack.api_keys[FRONTIER_API_KEY],
    database_url=stack.api_keys.get(GATEWAY_DATABASE_URL),
    developers=cfg.developers, harnesses=harnesses, fleet=fleet_routes,
    tls_certificate=stack.api_keys.get(GATEWAY_TLS_CERTIFICATE),
    tls_key=stack.api_keys.get(GATEWAY_TLS_KEY),
    backup_key=stack.api_keys.get(GATEWAY_BACKUP_KEY),
    private_key=stack.ssh_keys.get(gateway_cfg.name),
    upstreams={name: endpoints[name] for name in gateway_cfg.upstreams if name != FLEET_UPSTREAM}))
if fleet is not None:
    pulumi.export("vllm_fleet", fleet.outputs)

# The agent seats, after the gateway (each holds its developer's key) in the fleet's agent
# namespace; the config check admits seats only with a gateway and the fleet's sandbox.
sandbox = cfg.vllm_fleet.agent_sandbox if cfg.vllm_fleet else None
seats = None
if fleet is not None and gateway is not None and sandbox is not None and sandbox.seats:
    seats = AgentSeats("seat", AgentSeatsArgs(
        sandbox=sandbox, developers=cfg.developers, gateway_url=gateway.pod_url,
        trust=GatewayTrust.of(gateway_cfg),
        keys={dev: key.key for dev, key in gateway.access.keys.items()}, harnesses=harnesses,
        provider=fleet.provider, after=fleet.sandbox))

pulumi.export("inference_hosts", {name: host.outputs for name, host in inference_hosts.items()})
pulumi.export("runpod_pods", {name: pod.outputs for name, pod in runpod_pods.items()})
pulumi.export("reds_endpoints", {name: endpoint.outputs for name, endpoint in reds_endpoints.items()})
# The client side's backend table, so the policy pack can check the tunnel ports for collisions.
pulumi.export("backends", {name: dataclasses.asdict(backend)
                           for name, backend in stack.config.backends.items()})
if gateway is not None:
    pulumi.export("gateway", gateway.outputs)
    # Per developer, per harness: the environment (and Codex's config file), with the key.
    pulumi.export("harnesses", gateway.harnesses)
if seats is not None:
    # Per seat: whose it is, its harness and version, and the command that starts the harness.
    pulumi.export("seats", seats.outputs)


# Last: the SDK's wait for the registrations is linear only if they have started (why: there).
registrations.start_before_the_wait()
