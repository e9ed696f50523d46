"""The fleet's Kubernetes objects as plain mappings, rendered from the typed config (pure).

The component (components/vllm_fleet/__init__.py) hands these to pulumi-kubernetes; the policy
pack reads the same shapes back from the preview. Names are fixed (not auto-named): the policies
link a NetworkPolicy to its namespace and a Deployment to the rollout record by name, which an
auto-name would leave unknown at preview.
"""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

from config.types import AgentSandbox, EgressTarget, ServingPair, VllmFleet
from spear import vllm
from spear.rules import PRIORITY_CLASSES, pods_peer
from spear.seats import RUNTIME_CLASS
from spear.fleet import (AGENT_SANDBOX, ALERTS, APP, CACHE_SALT, CANARY_JSON, ENGINE_VERSION,
                         GATE_POLICY_JSON, GATE_TASKS_GZ, PART, PREVIOUS_JSON, PRIORITIES,
                         RECORDS_JSON, REVISION, ROLE, ROLLOUT, SERVED_WITH_JSON, STABLE,
                         STABLE_JSON, TENANCY, TRACK, evidence_key)

API_KEY_SECRET = "vllm-api-key"
MODEL_CACHE = "vllm-model-cache"
CACHE_MOUNT = "/root/.cache/huggingface"  # where vLLM keeps the downloaded weights
# Real GPU nodes commonly carry this taint.
GPU_TAINT = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
GPU = "nvidia.com/gpu"
HEALTH = "/health"
# Downloading and loading ~80 GB of weights takes a while: the startup probe allows an hour
# before liveness takes over.
STARTUP_SECONDS = 3600
PROBE_PERIOD = 10
# Kubernetes' default probe timeout is 1 s: a /health that answers late on a loaded node (vLLM's
# shares its API server's event loop with generation) would take a serving pod out of its Service.
PROBE_TIMEOUT = 5
# A pod being replaced keeps serving this long after it is marked terminating, so kube-proxy on
# every node (the gateway's path) has dropped it before vLLM stops listening: without it a
# rolling update refused connections for a while (measured on the local node).
DRAIN_SECONDS = 15
# Then vLLM finishes what it is answering (a long generation) before it is killed.
TERMINATION_GRACE_SECONDS = DRAIN_SECONDS + 120


def labels(track: str) -> dict[str, str]:
    return {"app": APP, TRACK: track, "app.kubernetes.io/part-of": "spear-fleet"}


def deployment_name(track: str) -> str:
    return f"{APP}-{track}"


def deployment(fleet: VllmFleet, track: str, pair: ServingPair, replicas: int) -> dict[str, Any]:
    """The Deployment of one track (stable or canary): the pair's image and revision, the fleet's
    serve settings; the key from the Secret, never on the command line."""
    port = fleet.vllm.port
    probe = {"httpGet": {"path": HEALTH, "port": "http"}, "periodSeconds": PROBE_PERIOD,
             "timeoutSeconds": PROBE_TIMEOUT}
    pod_labels = labels(track)
    return {
        "metadata": {"name": deployment_name(track), "namespace": fleet.namespace,
                     "labels": pod_labels,
                     "annotations": {ENGINE_VERSION: pair.tag, REVISION: pair.revision}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": APP, TRACK: track}},
            # Never below the declared capacity during a rollout: one extra pod at a time.
            "strategy": {"type": "RollingUpdate",
                         "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {
                "metadata": {"labels": pod_labels, "annotations": {
                    "prometheus.io/scrape": "true", "prometheus.io/port": str(port),
                    "prometheus.io/path": "/metrics",
                    ENGINE_VERSION: pair.tag, REVISION: pair.revision}},
                "spec": {
                    "terminationGracePeriodSeconds": TERMINATION_GRACE_SECONDS,
                    "tolerations": [GPU_TAINT],
                    "containers": [{
                        "name": "vllm",
                        "image": fleet.image_ref(pair),
                        "command": vllm.command_line(fleet.serve(pair)),
                        "ports": [{"name": "http", "containerPort": port}],
                        "env": [{"name": vllm.API_KEY_ENV, "valueFrom": {"secretKeyRef": {
                            "name": API_KEY_SECRET, "key": vllm.API_KEY_ENV}}}],
                        "resources": {"limits": {GPU: str(fleet.vllm.tensor_parallel_size)},
                                      "requests": {GPU: str(fleet.vllm.tensor_parallel_size)}},
                        "startupProbe": {**probe,
                                         "failureThreshold": STARTUP_SECONDS // PROBE_PERIOD},
                        "readinessProbe": {**probe, "failureThreshold": 3},
                        "livenessProbe": {**probe, "failureThreshold": 6},
                        "lifecycle": {"preStop": {"sleep": {"seconds": DRAIN_SECONDS}}},
                        "volumeMounts": [{"name": "model-cache", "mountPath": CACHE_MOUNT},
                                         {"name": "dshm", "mountPath": "/dev/shm"}],
                    }],
                    "volumes": [
                        {"name": "model-cache",
                         "persistentVolumeClaim": {"claimName": MODEL_CACHE}},
                        # Tensor parallelism shares tensors between GPU workers through /dev/shm.
                        {"name": "dshm", "emptyDir": {"medium": "Memory"}},
                    ],
                },
            },
        },
    }


def service_name(track: str) -> str:
    """`vllm` for stable (what everyone's `coder` reaches), `vllm-canary` for the canary."""
    return APP if track == STABLE else f"{APP}-{track}"


def service(fleet: VllmFleet, track: str) -> dict[str, Any]:
    """One Service per track: the canary's own, so that only the gateway's pilot-ring route
    reaches it (seed 001 "How to maintain it": rings), never a share of everyone's traffic."""
    spec: dict[str, Any] = {"selector": {"app": APP, TRACK: track},
                            "ports": [{"name": "http", "port": fleet.vllm.port, "targetPort": "http"}]}
    if track in fleet.service_ips:  # fixed: the gateway's route to it is known at preview
        spec["clusterIP"] = fleet.service_ips[track]
    return {"metadata": {"name": service_name(track), "namespace": fleet.namespace,
                         "labels": {"app": APP, TRACK: track}},
            "spec": spec}


# Who the gateway's prefix-affinity routing reads the tracks' pods as (gateway.coder.fleetRouting).
ROUTER = "spear-gateway-router"


def router_access(fleet: VllmFleet) -> dict[str, dict[str, Any]]:
    """The gateway's read of the tracks' EndpointSlices (which pods are ready) and pods (what
    each runs, which its receipts sign), and nothing else: a ServiceAccount with a Role that may
    only get, list and watch those in the fleet's namespace, and a token Secret for it (the token
    controller fills it; the gateway host has no ServiceAccount of its own)."""
    meta = {"name": ROUTER, "namespace": fleet.namespace}
    read = ["get", "list", "watch"]
    return {
        "account": {"metadata": meta},
        "role": {"metadata": meta, "rules": [
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": read},
            {"apiGroups": [""], "resources": ["pods"], "verbs": read}]},
        "binding": {"metadata": meta,
                    "role_ref": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                 "name": ROUTER},
                    "subjects": [{"kind": "ServiceAccount", "name": ROUTER,
                                  "namespace": fleet.namespace}]},
        "token": {"metadata": {**meta, "name": f"{ROUTER}-token",
                               "annotations": {"kubernetes.io/service-account.name": ROUTER}},
                  "type": "kubernetes.io/service-account-token"},
    }


def model_cache_claim(fleet: VllmFleet) -> dict[str, Any]:
    cache = fleet.model_cache
    spec: dict[str, Any] = {"accessModes": [cache.access_mode],
                            "resources": {"requests": {"storage": cache.size}}}
    if cache.host_path:  # bound to the fleet's own static volume
        spec.update(storageClassName="", volumeName=model_cache_volume_name(fleet))
    elif cache.storage_class:
        spec["storageClassName"] = cache.storage_class
    return {"metadata": {"name": MODEL_CACHE, "namespace": fleet.namespace}, "spec": spec}


def model_cache_volume_name(fleet: VllmFleet) -> str:
    return f"{fleet.namespace}-{MODEL_CACHE}"


def model_cache_volume(fleet: VllmFleet) -> dict[str, Any] | None:
    """A static volume on the node's disk, for a cluster without a provisioner (modelCache.hostPath)."""
    cache = fleet.model_cache
    if not cache.host_path:
        return None
    return {"metadata": {"name": model_cache_volume_name(fleet)},
            "spec": {"capacity": {"storage": cache.size}, "accessModes": [cache.access_mode],
                     "storageClassName": "", "persistentVolumeReclaimPolicy": "Retain",
                     "hostPath": {"path": cache.host_path, "type": "DirectoryOrCreate"},
                     "claimRef": {"namespace": fleet.namespace, "name": MODEL_CACHE}}}


def _pair_json(pair: ServingPair | None) -> str:
    return json.dumps(None if pair is None else {"tag": pair.tag, "digest": pair.digest,
                                                 "model": pair.model, "revision": pair.revision})


def _key_json(key: tuple[str, str, str] | None) -> dict[str, str] | None:
    return None if key is None else dict(zip(("tag", "model", "revision"), key))


def rollout_pairs(fleet: VllmFleet) -> dict[str, Any]:
    """The stable, previous and canary pairs this update deploys (tag, model, revision)."""
    return {"stable": _key_json(fleet.stable.key),
            "previous": _key_json(fleet.previous.key if fleet.previous else None),
            "canary": _key_json(fleet.canary.pair.key if fleet.canary else None)}


def _gz(data: bytes) -> str:
    # mtime=0: the same bytes give the same ConfigMap, so an unchanged gate shows no diff.
    return base64.b64encode(gzip.compress(data, mtime=0)).decode()


def rollout_record(fleet: VllmFleet) -> dict[str, Any]:
    """The rollout state the gate policy reads: the pairs, the gate policy, and the records with
    the verdicts the config check found, beside what the policy pack re-judges them by."""
    gate = fleet.gate
    # Only the stable pair's records: they are what the policy judges, and a ConfigMap holds at
    # most 1 MiB however many runs the folder keeps.
    shipped = [r for r in gate.records if r.pin.pair == fleet.stable.key] if gate else []
    records = [{**gate.written[r.name], "failures": list(r.failures)} for r in shipped]
    binary = ({GATE_TASKS_GZ: _gz(gate.tasks),
               **{evidence_key(r.name): _gz(gate.evidence[r.name]) for r in shipped}}
              if gate else {})
    return {"metadata": {"name": f"{APP}-rollout", "namespace": fleet.namespace,
                         "labels": {PART: ROLLOUT}},
            "data": {STABLE_JSON: _pair_json(fleet.stable),
                     PREVIOUS_JSON: _pair_json(fleet.previous),
                     CANARY_JSON: _pair_json(fleet.canary.pair if fleet.canary else None),
                     GATE_POLICY_JSON: json.dumps(gate.policy.to_json() if gate else None,
                                                  sort_keys=True),
                     RECORDS_JSON: json.dumps(records, sort_keys=True),
                     SERVED_WITH_JSON: json.dumps(gate.served_with.to_json()
                                                  if gate and gate.served_with else None,
                                                  sort_keys=True)},
            **({"binaryData": binary} if binary else {})}


def tenancy(fleet: VllmFleet) -> dict[str, Any]:
    """What the gateway injects on requests to this fleet (seed 001 "How to run it in
    production"): the cache_salt scope, and the priorities when vLLM schedules by them."""
    priorities = PRIORITY_CLASSES if fleet.vllm.scheduling_priority else {}
    return {"metadata": {"name": f"{APP}-tenancy", "namespace": fleet.namespace,
                         "labels": {PART: TENANCY}},
            "data": {CACHE_SALT: fleet.cache_salt, PRIORITIES: json.dumps(priorities)}}


def alert_rules(fleet: VllmFleet, text: str, file_name: str) -> dict[str, Any]:
    return {"metadata": {"name": f"{APP}-alerts", "namespace": fleet.namespace,
                         "labels": {PART: ALERTS, "prometheus.io/rules": "true"}},
            "data": {file_name: text}}


FLEET_INGRESS = f"{APP}-ingress"
# An Operator's Prometheus pods, in whatever namespace it runs (the Operator labels them so).
OPERATOR_PROMETHEUS = {"app.kubernetes.io/name": "prometheus"}


def fleet_ingress(fleet: VllmFleet) -> dict[str, Any]:
    """Every track's pods (the canary's too) take connections on vLLM's port only from the
    in-cluster gateway's pods, an Operator's Prometheus and the addresses `ingressFrom` names (a
    gateway host, a Prometheus on the node's network): no key reaches a track but through the
    gateway, whose rings decide who reaches the canary."""
    peers: list[dict[str, Any]] = []
    if fleet.gateway_pods is not None:
        peers.append(pods_peer(fleet.gateway_pods[0], dict(fleet.gateway_pods[1])))
    if fleet.prometheus.mode == "operator":
        peers.append({"namespaceSelector": {}, "podSelector": {"matchLabels": OPERATOR_PROMETHEUS}})
    peers += [{"ipBlock": {"cidr": cidr}} for cidr in fleet.ingress_from]
    return {"metadata": {"name": FLEET_INGRESS, "namespace": fleet.namespace},
            "spec": {"podSelector": {"matchLabels": {"app": APP}}, "policyTypes": ["Ingress"],
                     "ingress": [{"from": peers, "ports": [{"protocol": "TCP",
                                                            "port": fleet.vllm.port}]}]
                     if peers else []}}


# ---------------------------------------------------------------------------------------------
# The agent sandbox (seed 001 step 7): default-deny egress, then exactly the gateway and the
# package mirrors (no DNS: spear/rules.py says why).

DENY_EGRESS = "default-deny-egress"
ALLOW_EGRESS = "allow-egress"


def sandbox_namespace(sandbox: AgentSandbox) -> dict[str, Any]:
    runtime = {RUNTIME_CLASS: sandbox.runtime_class} if sandbox.runtime_class else {}
    return {"metadata": {"name": sandbox.namespace, "labels": {ROLE: AGENT_SANDBOX, **runtime}}}


def deny_egress(sandbox: AgentSandbox) -> dict[str, Any]:
    """Every pod of the namespace, no egress rule: nothing leaves unless another policy allows it."""
    return {"metadata": {"name": DENY_EGRESS, "namespace": sandbox.namespace},
            "spec": {"podSelector": {}, "policyTypes": ["Egress"]}}


def _to(target: EgressTarget) -> dict[str, Any]:
    peer = ({"ipBlock": {"cidr": target.cidr}} if target.pods is None
            else pods_peer(target.pods[0], dict(target.pods[1])))
    return {"to": [peer], "ports": [{"protocol": "TCP", "port": port} for port in target.ports]}


def allow_egress(sandbox: AgentSandbox) -> dict[str, Any]:
    targets = [*([sandbox.gateway] if sandbox.gateway else []), *sandbox.mirrors]
    return {"metadata": {"name": ALLOW_EGRESS, "namespace": sandbox.namespace},
            "spec": {"podSelector": {}, "policyTypes": ["Egress"],
                     "egress": [_to(target) for target in targets]}}
