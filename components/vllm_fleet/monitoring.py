"""Who scrapes the fleet and the gateway and evaluates the alert rules (vllmFleet.observability
.prometheus), as plain mappings rendered from the typed config (pure).

- `bundled`: a Prometheus the stack runs in the fleet's namespace. A sidecar
  (pod_discovery.py) finds the fleet's pods (and an in-cluster gateway's) through the API server
  with a ServiceAccount that may only read pods; the server loads the alert-rule ConfigMap, and reads the gateway's /metrics/ with the master key
  from a Secret of its own. It runs on the node's network: it then reaches a gateway on the node's
  loopback (the local stack's), and you reach it at <node>:<port>. Prometheus reads its files once,
  so the pod template carries their digest: a rule or scrape change restarts it.
- `operator`: the Prometheus Operator's objects: the rules as a PrometheusRule, the fleet's pods
  (and an in-cluster gateway's) as PodMonitors, a gateway on a host as a ScrapeConfig.
- `none`: nothing beyond the rule and dashboard ConfigMaps, for a Prometheus you run.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from config.types import VllmFleet
from spear.fleet import APP, MONITORING, PART, TRACK

NAME = "prometheus"
LABELS = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": "spear-fleet",
          PART: MONITORING}
GATEWAY_KEY_SECRET = "spear-gateway-metrics-key"
GATEWAY_KEY = "master-key"
GATEWAY_CA = "gateway-ca.pem"  # beside the key: the root that signs an in-cluster gateway's TLS
GATEWAY_METRICS_PATH = "/metrics/"  # LiteLLM's; /metrics redirects there
CONFIG_FILE = "prometheus.yml"
DISCOVERY_FILE, JOBS_FILE = "pod_discovery.py", "discovery.json"
FLEET_JOB, GATEWAY_JOB = "vllm-fleet", "spear-gateway"
# One folder per volume: a volume cannot be mounted inside a read-only ConfigMap's.
CONFIG_DIR, RULES_DIR, KEY_DIR, TARGETS_DIR, DATA_DIR = (
    "/etc/prometheus/config", "/etc/prometheus/rules", "/etc/prometheus/gateway",
    "/etc/prometheus/targets", "/prometheus")
CONFIG_DIGEST = "spear-fleet/config-sha256"
UID = 1000  # the image's unprivileged user (localhosts/images/prometheus_image.py)
SERVER = "/usr/bin/prometheus"  # where localhosts/images/prometheus_image.py puts it
OPERATOR_API = "monitoring.coreos.com/v1"
SCRAPE_CONFIG_API = "monitoring.coreos.com/v1alpha1"


@dataclass(frozen=True)
class GatewayTarget:
    """Where the gateway's /metrics/ is: its pods (in-cluster) or its listen address (a host);
    components/gateway's metrics_target says which."""
    address: str | None = None  # host:port, for a gateway on a host
    namespace: str | None = None  # gateway.kubernetes: its pods' namespace
    pod_labels: dict[str, str] = field(default_factory=dict)
    # gateway.kubernetes.tls: the pods serve HTTPS for this name, signed by this root.
    tls_name: str | None = None
    root_pem: str | None = None


def discovery_jobs(fleet: VllmFleet, gateway: GatewayTarget | None) -> dict[str, Any]:
    """What the discovery sidecar lists (pod_discovery.py): the fleet's pods, and an in-cluster
    gateway's."""
    jobs = {FLEET_JOB: {"namespace": fleet.namespace, "selector": f"app={APP}", "port": "http"}}
    if gateway is not None and gateway.namespace:
        jobs[GATEWAY_JOB] = {"namespace": gateway.namespace, "port": "http",
                             "selector": ",".join(f"{k}={v}" for k, v in
                                                  sorted(gateway.pod_labels.items()))}
    return {"interval": fleet.prometheus.scrape_interval_seconds, "jobs": jobs,
            "api_server": fleet.prometheus.api_server}


def _file_sd(job: str) -> dict[str, Any]:
    return {"file_sd_configs": [{"files": [f"{TARGETS_DIR}/{job}.json"]}]}


def scrape_configs(fleet: VllmFleet, gateway: GatewayTarget | None) -> list[dict[str, Any]]:
    """The bundled server's scrape jobs: every fleet pod (labelled with its track), then the
    gateway, with the master key."""
    jobs = [{"job_name": FLEET_JOB, **_file_sd(FLEET_JOB)}]
    if gateway is None:
        return jobs
    where = ({"static_configs": [{"targets": [gateway.address]}]} if gateway.address
             else _file_sd(GATEWAY_JOB))
    # A pod's address is not the certificate's name: the name is checked as the pods serve it.
    tls = ({"scheme": "https", "tls_config": {"ca_file": f"{KEY_DIR}/{GATEWAY_CA}",
                                              "server_name": gateway.tls_name}}
           if gateway.tls_name else {})
    jobs.append({"job_name": GATEWAY_JOB, "metrics_path": GATEWAY_METRICS_PATH,
                 "authorization": {"credentials_file": f"{KEY_DIR}/{GATEWAY_KEY}"}, **tls, **where})
    return jobs


def server_config(fleet: VllmFleet, gateway: GatewayTarget | None, rules_file: str) -> str:
    interval = f"{fleet.prometheus.scrape_interval_seconds}s"
    return yaml.safe_dump({
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": [f"{RULES_DIR}/{rules_file}"],
        "scrape_configs": scrape_configs(fleet, gateway)}, sort_keys=False)


def _meta(fleet: VllmFleet, name: str = NAME) -> dict[str, Any]:
    return {"name": name, "namespace": fleet.namespace, "labels": LABELS}


def gateway_key_secret(fleet: VllmFleet, master_key: Any, gateway: GatewayTarget) -> dict[str, Any]:
    return {"metadata": _meta(fleet, GATEWAY_KEY_SECRET), "type": "Opaque",
            "string_data": {GATEWAY_KEY: master_key,
                            **({GATEWAY_CA: gateway.root_pem} if gateway.root_pem else {})}}


# ---------------------------------------------------------------------------------------------
# bundled

def cluster_role_name(fleet: VllmFleet) -> str:
    return f"spear-fleet-prometheus-{fleet.namespace}"  # cluster-wide: one per fleet


def service_account(fleet: VllmFleet) -> dict[str, Any]:
    return {"metadata": _meta(fleet)}


def cluster_role(fleet: VllmFleet) -> dict[str, Any]:
    # Pods only, read only: what pod discovery needs (the fleet's and an in-cluster gateway's
    # namespaces, which a Role could not cover before the gateway's namespace exists).
    return {"metadata": {"name": cluster_role_name(fleet), "labels": LABELS},
            "rules": [{"apiGroups": [""], "resources": ["pods"],
                       "verbs": ["get", "list", "watch"]}]}


def cluster_role_binding(fleet: VllmFleet) -> dict[str, Any]:
    return {"metadata": {"name": cluster_role_name(fleet), "labels": LABELS},
            "role_ref": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                         "name": cluster_role_name(fleet)},
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": fleet.namespace}]}


def config_files(fleet: VllmFleet, gateway: GatewayTarget | None, rules_file: str) -> dict[str, str]:
    """The server's ConfigMap: prometheus.yml, and the discovery sidecar with its jobs."""
    return {CONFIG_FILE: server_config(fleet, gateway, rules_file),
            JOBS_FILE: json.dumps(discovery_jobs(fleet, gateway), indent=2, sort_keys=True),
            DISCOVERY_FILE: (Path(__file__).parent / DISCOVERY_FILE).read_text()}


def config_map(fleet: VllmFleet, files: dict[str, str]) -> dict[str, Any]:
    return {"metadata": _meta(fleet), "data": files}


_LOCKED_DOWN = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                "capabilities": {"drop": ["ALL"]}}


def deployment(fleet: VllmFleet, files: dict[str, str], rules_text: str,
               rules_config_map: str) -> dict[str, Any]:
    prom = fleet.prometheus
    digest = hashlib.sha256(json.dumps([files, rules_text], sort_keys=True).encode()).hexdigest()
    http = {"port": prom.port}
    config = {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True}
    targets = {"name": "targets", "mountPath": TARGETS_DIR}
    return {
        "metadata": _meta(fleet),
        "spec": {
            "replicas": 1,
            # One port on the node's network: the old pod must be gone before the new one binds.
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": {"app.kubernetes.io/name": NAME}},
            "template": {
                "metadata": {"labels": LABELS, "annotations": {CONFIG_DIGEST: digest}},
                "spec": {
                    "serviceAccountName": NAME,
                    "hostNetwork": True,
                    "dnsPolicy": "ClusterFirstWithHostNet",
                    "securityContext": {"runAsNonRoot": True, "runAsUser": UID, "runAsGroup": UID,
                                        "fsGroup": UID},
                    "containers": [{
                        # The image's entrypoint is the server (as in prom/prometheus).
                        "name": NAME, "image": prom.image,
                        "args": [f"--config.file={CONFIG_DIR}/{CONFIG_FILE}",
                                 f"--storage.tsdb.path={DATA_DIR}",
                                 f"--storage.tsdb.retention.time={prom.retention}",
                                 f"--web.listen-address=:{prom.port}"],
                        "ports": [{"name": "http", "containerPort": prom.port}],
                        "readinessProbe": {"httpGet": {"path": "/-/ready", **http},
                                           "periodSeconds": 5},
                        "livenessProbe": {"httpGet": {"path": "/-/healthy", **http},
                                          "periodSeconds": 30, "failureThreshold": 4},
                        "securityContext": _LOCKED_DOWN,
                        "volumeMounts": [
                            config, targets,
                            {"name": "rules", "mountPath": RULES_DIR, "readOnly": True},
                            {"name": "gateway-key", "mountPath": KEY_DIR, "readOnly": True},
                            {"name": "data", "mountPath": DATA_DIR}],
                    }, {
                        "name": "pod-discovery", "image": prom.image,
                        "command": ["python3", f"{CONFIG_DIR}/{DISCOVERY_FILE}",
                                    f"{CONFIG_DIR}/{JOBS_FILE}", TARGETS_DIR],
                        "securityContext": _LOCKED_DOWN,
                        "volumeMounts": [config, targets],
                    }],
                    "volumes": [
                        {"name": "config", "configMap": {"name": NAME}},
                        {"name": "rules", "configMap": {"name": rules_config_map}},
                        {"name": "gateway-key", "secret": {"secretName": GATEWAY_KEY_SECRET}},
                        {"name": "targets", "emptyDir": {}},
                        {"name": "data", "emptyDir": {}}],
                },
            },
        },
    }


# ---------------------------------------------------------------------------------------------
# operator

def _operator_meta(fleet: VllmFleet, name: str) -> dict[str, Any]:
    return {"name": name, "namespace": fleet.namespace,
            "labels": {**LABELS, **fleet.prometheus.selector_labels}}


def prometheus_rule(fleet: VllmFleet, rules: dict[str, Any]) -> dict[str, Any]:
    return {"api_version": OPERATOR_API, "kind": "PrometheusRule",
            "metadata": _operator_meta(fleet, f"{APP}-alerts"), "spec": rules}


def _gateway_endpoint(interval: str) -> dict[str, Any]:
    return {"path": GATEWAY_METRICS_PATH, "interval": interval,
            "authorization": {"type": "Bearer",
                              "credentials": {"name": GATEWAY_KEY_SECRET, "key": GATEWAY_KEY}}}


def _gateway_tls(gateway: GatewayTarget) -> dict[str, Any]:
    if not gateway.tls_name:
        return {}
    return {"scheme": "https", "tlsConfig": {
        "serverName": gateway.tls_name,
        "ca": {"secret": {"name": GATEWAY_KEY_SECRET, "key": GATEWAY_CA}}}}


def monitors(fleet: VllmFleet, gateway: GatewayTarget | None) -> list[dict[str, Any]]:
    """The fleet's PodMonitor, then the gateway's: a PodMonitor for its pods, or a ScrapeConfig
    for its host."""
    interval = f"{fleet.prometheus.scrape_interval_seconds}s"
    found = [{"api_version": OPERATOR_API, "kind": "PodMonitor",
              "metadata": _operator_meta(fleet, APP),
              "spec": {"selector": {"matchLabels": {"app": APP}},
                       "podTargetLabels": [TRACK],
                       "podMetricsEndpoints": [{"port": "http", "path": "/metrics",
                                                "interval": interval}]}}]
    if gateway is None:
        return found
    if gateway.address:
        found.append({"api_version": SCRAPE_CONFIG_API, "kind": "ScrapeConfig",
                      "metadata": _operator_meta(fleet, "spear-gateway"),
                      "spec": {"staticConfigs": [{"targets": [gateway.address]}],
                               "metricsPath": GATEWAY_METRICS_PATH,
                               "scrapeInterval": interval,
                               "authorization": _gateway_endpoint(interval)["authorization"]}})
    else:
        found.append({"api_version": OPERATOR_API, "kind": "PodMonitor",
                      "metadata": _operator_meta(fleet, "spear-gateway"),
                      "spec": {"namespaceSelector": {"matchNames": [gateway.namespace]},
                               "selector": {"matchLabels": gateway.pod_labels},
                               "podMetricsEndpoints": [{"port": "http",
                                                        **_gateway_endpoint(interval),
                                                        **_gateway_tls(gateway)}]}})
    return found
