"""The vLLM fleet on Kubernetes (seed 001 steps 2-3, 7-8, "How to run it in production", "How to
maintain it"), with the real Kubernetes provider.

One explicit provider from the stack's kubeconfig (a secret, a file, or the ambient one), so the
fleet never lands on whatever cluster a shell happens to point at. The objects
(components/vllm_fleet/manifests.py): the fleet's namespace; vLLM's API key as a Secret fed by
the stack's Pulumi secret; the model-cache claim (and a static volume when the stack names a
node path); the `stable` Deployment and its Service, and a `canary` Deployment with a Service of its own when
declared (the gateway routes only the pilot ring to it); the rollout record, tenancy,
alert-rule and Grafana dashboard ConfigMaps; who scrapes and evaluates them
(components/vllm_fleet/monitoring.py: a bundled Prometheus, or the Operator's objects); and the
agent sandbox's namespace with
default-deny egress and its allowlist. `tracks` says, per track, where the gateway reaches it and what proves a rollout.

A new image tag or revision of a pair changes its Deployment's pod template: Kubernetes rolls it
out (maxSurge 1, maxUnavailable 0) and pulumi-kubernetes waits until the rollout is Available.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.hostops.kube_api import api_server, cluster_access
from components.vllm_fleet import alerts, dashboard, manifests, monitoring
from config.types import Hatch, ServingPair
from config.types import VllmFleet as FleetConfig
from spear import tokens, vllm
from spear.fleet import CANARY, STABLE


@dataclass
class Track:
    """One track as the gateway reaches it: its Service's cluster address, and what its pods
    serve (a change re-runs the track's verification)."""
    name: str  # STABLE or CANARY
    address: pulumi.Input[str]  # the Service's cluster IP (the stack's, when it fixes one)
    port: int
    service: tuple[str, str]  # (namespace, name): where its pods' EndpointSlices are
    served_model: str
    pair: dict[str, Any]  # the (image, model, revision) it runs
    generation: pulumi.Output[Any]  # the Deployment's: moves with every change of its pods
    max_model_len: int  # the served window (the throughput measure's prompt fits in it)
    throughput_min_ratio: float | None  # observability.throughputMinRatio
    after: list[pulumi.Resource] = field(default_factory=list)
    # How long a replaced pod keeps answering after its rollout is done (its preStop drain, then
    # its exit): what proves a rollout must come after it.
    settle_seconds: float = manifests.DRAIN_SECONDS + 10


@dataclass
class VllmFleetArgs:
    config: FleetConfig
    api_key: pulumi.Input[str]  # secret: what vLLM demands of its clients (VLLM_API_KEY)
    kubeconfig: pulumi.Input[str] | None = None  # secret text; None: the config's file or ambient
    hatch: Hatch | None = None  # the gateway's (gateway.hatch): its spend alert rule
    request_timeout: int | None = None  # the gateway's coder.requestTimeout: its holds' alert
    # The gateway, for the fleet's Prometheus (observability.prometheus): where its /metrics/
    # is, and the master key it asks for (secret).
    gateway: monitoring.GatewayTarget | None = None
    gateway_key: pulumi.Input[str] | None = None
    # The gateway picks the tracks' pods itself (gateway.coder.fleetRouting prefix-affinity):
    # it gets a token that reads their EndpointSlices and pods.
    pod_router: bool = False


class VllmFleet(pulumi.ComponentResource):
    def __init__(self, name: str, args: VllmFleetArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(tokens.VLLM_FLEET, name, None, opts)
        cfg = args.config
        kubeconfig = args.kubeconfig if args.kubeconfig is not None else cfg.kubeconfig.path
        # ConfigMaps and Secrets update in place: the rollout record changes on every promotion
        # and the key may be rotated, and their names are fixed (a replacement would collide).
        # What a dynamic resource keeps to reach the same cluster (the gateway's checks in it).
        self.cluster = cluster_access(args.kubeconfig, cfg.kubeconfig.path, cfg.kubeconfig.context)
        self.provider = k8s.Provider(f"{name}-cluster", kubeconfig=kubeconfig,
                                     context=cfg.kubeconfig.context,
                                     enable_config_map_mutable=True, enable_secret_mutable=True,
                                     opts=pulumi.ResourceOptions(parent=self))
        on_cluster = pulumi.ResourceOptions(parent=self, provider=self.provider)

        def after(*resources: pulumi.Resource, **extra: Any) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(
                depends_on=list(resources), **extra))

        self.namespace = k8s.core.v1.Namespace(
            f"{name}-namespace", metadata={"name": cfg.namespace}, opts=on_cluster)
        self.api_key = k8s.core.v1.Secret(
            f"{name}-api-key",
            metadata={"name": manifests.API_KEY_SECRET, "namespace": cfg.namespace},
            string_data={vllm.API_KEY_ENV: pulumi.Output.secret(args.api_key)},
            type="Opaque", opts=after(self.namespace))
        volume = manifests.model_cache_volume(cfg)
        self.model_cache_volume = None if volume is None else k8s.core.v1.PersistentVolume(
            f"{name}-model-cache-volume", **volume, opts=on_cluster)
        claim = manifests.model_cache_claim(cfg)
        self.model_cache = k8s.core.v1.PersistentVolumeClaim(
            f"{name}-model-cache", **claim,
            opts=after(self.namespace, *([self.model_cache_volume] if self.model_cache_volume else []),
                       # A fixed name: a replacement (a new size or class) deletes the old first.
                       delete_before_replace=True))
        rollout = manifests.rollout_record(cfg)
        self.rollout = k8s.core.v1.ConfigMap(f"{name}-rollout", metadata=rollout["metadata"],
                                             data=rollout["data"],
                                             binary_data=rollout.get("binaryData"),
                                             opts=after(self.namespace))
        self.tenancy = k8s.core.v1.ConfigMap(f"{name}-tenancy", **manifests.tenancy(cfg),
                                             opts=after(self.namespace))
        rules_text = alerts.render(cfg.alerts, cfg.vllm.served_model_name, args.hatch,
                                   args.request_timeout)
        rules_config_map = manifests.alert_rules(cfg, rules_text, alerts.RULES_FILE)
        self.alert_rules = k8s.core.v1.ConfigMap(f"{name}-alerts", **rules_config_map,
                                                 opts=after(self.namespace))
        self.monitoring = self._monitoring(name, cfg, args, rules_text,
                                           rules_config_map["metadata"]["name"], after)
        self.dashboard = k8s.core.v1.ConfigMap(
            f"{name}-dashboard", **dashboard.config_map(cfg.namespace, cfg.vllm.served_model_name),
            opts=after(self.namespace))
        # Before any vLLM pod serves: only the gateway and the scraper reach them.
        self.ingress = k8s.networking.v1.NetworkPolicy(f"{name}-ingress",
                                                       **manifests.fleet_ingress(cfg),
                                                       opts=after(self.namespace))
        pod_inputs = (self.api_key, self.model_cache, self.ingress)
        self.stable = k8s.apps.v1.Deployment(
            f"{name}-{STABLE}",
            **manifests.deployment(cfg, STABLE, cfg.stable, cfg.replicas),
            opts=after(*pod_inputs))
        self.canary = None if cfg.canary is None else k8s.apps.v1.Deployment(
            f"{name}-{CANARY}",
            **manifests.deployment(cfg, CANARY, cfg.canary.pair, cfg.canary.replicas),
            opts=after(*pod_inputs))
        # Fixed names (and perhaps fixed cluster IPs): a replacement deletes the old one first.
        self.service = k8s.core.v1.Service(f"{name}-service", **manifests.service(cfg, STABLE),
                                           opts=after(self.namespace, delete_before_replace=True))
        self.canary_service = None if cfg.canary is None else k8s.core.v1.Service(
            f"{name}-canary-service", **manifests.service(cfg, CANARY),
            opts=after(self.namespace, delete_before_replace=True))
        self.router = self._router(name, cfg, after) if args.pod_router else None
        self.tracks = [self._track(STABLE, cfg.stable, self.stable, self.service, cfg)]
        if self.canary is not None and self.canary_service is not None:
            self.tracks.append(self._track(CANARY, cfg.canary.pair, self.canary, self.canary_service, cfg))

        self.sandbox: list[pulumi.Resource] = []
        if cfg.agent_sandbox:
            sandbox = cfg.agent_sandbox
            namespace = k8s.core.v1.Namespace(f"{name}-agents",
                                              **manifests.sandbox_namespace(sandbox), opts=on_cluster)
            self.sandbox = [
                namespace,
                k8s.networking.v1.NetworkPolicy(f"{name}-agents-deny-egress",
                                                **manifests.deny_egress(sandbox),
                                                opts=after(namespace)),
                k8s.networking.v1.NetworkPolicy(f"{name}-agents-allow-egress",
                                                **manifests.allow_egress(sandbox),
                                                opts=after(namespace)),
            ]

        self.outputs: dict[str, Any] = {
            "namespace": cfg.namespace,
            # In the cluster, each track's Service by name; the gateway uses the cluster IPs.
            "endpoints": {track.name: f"http://{manifests.service_name(track.name)}.{cfg.namespace}"
                          f".svc.cluster.local:{cfg.vllm.port}/v1" for track in self.tracks},
            "cluster_ips": {track.name: track.address for track in self.tracks},
            "served_model_name": cfg.vllm.served_model_name,
            # What the next preview compares a change of stable with (config/load.py), and the
            # canary pair scripts/gate pins (gate/stack.py).
            "rollout": manifests.rollout_pairs(cfg),
            "stable": {"image": cfg.image_ref(cfg.stable), "revision": cfg.stable.revision,
                       "replicas": cfg.replicas},
            "canary": None if cfg.canary is None else {
                "image": cfg.image_ref(cfg.canary.pair), "revision": cfg.canary.pair.revision,
                "replicas": cfg.canary.replicas,
                "ready_replicas": self.canary.status.apply(
                    lambda status: status.ready_replicas if status else None)},
            "previous": None if cfg.previous is None else {
                "image": cfg.image_ref(cfg.previous), "revision": cfg.previous.revision},
            "stable_ready_replicas": self.stable.status.apply(
                lambda status: status.ready_replicas if status else None),
            "agent_namespace": cfg.agent_sandbox.namespace if cfg.agent_sandbox else None,
            # bundled: the port it listens on, on the node's network
            "prometheus": {"mode": cfg.prometheus.mode, "port": cfg.prometheus.port
                           if cfg.prometheus.mode == "bundled" else None},
        }
        self.register_outputs(self.outputs)

    def _monitoring(self, name: str, cfg: FleetConfig, args: VllmFleetArgs, rules_text: str,
                    rules_config_map: str, after: Any) -> list[pulumi.Resource]:
        """observability.prometheus's objects (components/vllm_fleet/monitoring.py)."""
        mode = cfg.prometheus.mode
        if mode == "none":
            return []
        made: list[pulumi.Resource] = []
        if args.gateway is not None and args.gateway_key is not None:
            made.append(k8s.core.v1.Secret(
                f"{name}-prometheus-gateway-key", **monitoring.gateway_key_secret(
                    cfg, pulumi.Output.secret(args.gateway_key), args.gateway),
                opts=after(self.namespace)))
        gateway = args.gateway if made else None
        if mode == "operator":
            rules = alerts.rules(cfg.alerts, cfg.vllm.served_model_name, args.hatch,
                                 args.request_timeout)
            for spec in (monitoring.prometheus_rule(cfg, rules),
                         *monitoring.monitors(cfg, gateway)):
                made.append(k8s.apiextensions.CustomResource(
                    f"{name}-{spec['kind'].lower()}-{spec['metadata']['name']}", **spec,
                    opts=after(self.namespace, *made)))
            return made
        files = monitoring.config_files(cfg, gateway, alerts.RULES_FILE)
        account = k8s.core.v1.ServiceAccount(f"{name}-prometheus-account",
                                             **monitoring.service_account(cfg),
                                             opts=after(self.namespace))
        role = k8s.rbac.v1.ClusterRole(f"{name}-prometheus-role", **monitoring.cluster_role(cfg),
                                       opts=after())
        binding = k8s.rbac.v1.ClusterRoleBinding(f"{name}-prometheus-binding",
                                                 **monitoring.cluster_role_binding(cfg),
                                                 opts=after(role, account))
        config = k8s.core.v1.ConfigMap(f"{name}-prometheus-config",
                                       **monitoring.config_map(cfg, files),
                                       opts=after(self.namespace))
        server = k8s.apps.v1.Deployment(
            f"{name}-prometheus", **monitoring.deployment(
                cfg, files, rules_text, rules_config_map),
            opts=after(binding, config, self.alert_rules, *made))
        return [*made, account, role, binding, config, server]

    def _router(self, name: str, cfg: FleetConfig, after: Any) -> pulumi.Output[dict[str, str]]:
        """The gateway's read of the pods (manifests.router_access): the API server, its CA and
        the token (secret)."""
        made = manifests.router_access(cfg)
        account = k8s.core.v1.ServiceAccount(f"{name}-router-account", **made["account"],
                                             opts=after(self.namespace))
        role = k8s.rbac.v1.Role(f"{name}-router-role", **made["role"], opts=after(self.namespace))
        k8s.rbac.v1.RoleBinding(f"{name}-router-binding", **made["binding"],
                                opts=after(role, account))
        # pulumi-kubernetes waits until the token controller has filled a token Secret.
        token = k8s.core.v1.Secret(f"{name}-router-token", **made["token"], opts=after(account))
        return pulumi.Output.secret(pulumi.Output.all(self.cluster, token.data).apply(
            lambda both: {**api_server(both[0]),
                          "token": base64.b64decode(both[1]["token"]).decode()}))

    @staticmethod
    def _track(track: str, pair: ServingPair, deployment: k8s.apps.v1.Deployment,
               service: k8s.core.v1.Service, cfg: FleetConfig) -> Track:
        return Track(name=track, address=cfg.service_ips.get(track) or service.spec.cluster_ip,
                     port=cfg.vllm.port,
                     service=(cfg.namespace, manifests.service_name(track)),
                     served_model=cfg.vllm.served_model_name,
                     pair={"image": cfg.image_ref(pair), "model": pair.model, "revision": pair.revision},
                     generation=deployment.metadata.generation, after=[deployment, service],
                     max_model_len=cfg.vllm.max_model_len,
                     throughput_min_ratio=cfg.alerts.throughput_min_ratio)
