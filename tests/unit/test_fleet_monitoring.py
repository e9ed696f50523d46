"""components/vllm_fleet/monitoring.py: the bundled Prometheus's configuration is one Debian's
promtool accepts and scrapes the fleet's pods and the gateway with its key; its pod restarts when
a rule or a scrape changes; the Operator's objects carry the same rules and the stack's selector
labels; and the local stack names the image localhosts/images/prometheus_image.py builds."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import yaml

from components.gateway import metrics_target
from components.vllm_fleet import alerts, monitoring, pod_discovery
from config.load import parse_stack
from config.types import Prometheus
from localhosts.images import image_files, prometheus_image
from tests.support.config_cases import MASTER_KEY, fleet_raw
from tests.support.stack_files import stack_raw, with_placeholder_keys
from tests.unit import test_cluster_gateway as in_cluster
from tests.unit import test_gateway_components as components

RULES = alerts.RULES_FILE


def fleet_with(**prometheus):
    fleet = parse_stack(fleet_raw()).vllm_fleet
    return dataclasses.replace(fleet, prometheus=Prometheus(**{
        "mode": "bundled", "scrape_interval_seconds": 5, "image": "prom/prometheus:v2.53.0",
        **prometheus}))


def host_gateway():
    return parse_stack(components.local_raw()).gateway


def cluster_gateway():
    return parse_stack(in_cluster.cluster_raw()).gateway


def test_promtool_accepts_the_bundled_servers_configuration(tmp_path):
    fleet = fleet_with()
    text = monitoring.server_config(fleet, metrics_target(host_gateway()), RULES)
    # The same files the Deployment mounts, in a folder of the test's.
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / RULES).write_text(alerts.render(fleet.alerts, "coder", None))
    (tmp_path / "gateway").mkdir()
    (tmp_path / "gateway" / monitoring.GATEWAY_KEY).write_text("sk-master")
    (tmp_path / "targets").mkdir()
    (tmp_path / "prometheus.yml").write_text(text.replace("/etc/prometheus", str(tmp_path)))
    checked = subprocess.run(["promtool", "check", "config", str(tmp_path / "prometheus.yml")],
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 1 rule files found" in checked.stdout + checked.stderr


def test_the_fleets_pods_are_discovered_by_label_and_port_and_the_gateway_host_is_its_address():
    gateway = host_gateway()
    config = yaml.safe_load(monitoring.server_config(fleet_with(), metrics_target(gateway), RULES))
    assert config["global"] == {"scrape_interval": "5s", "evaluation_interval": "5s"}
    assert config["rule_files"] == [f"/etc/prometheus/rules/{RULES}"]
    fleet_job, gateway_job = config["scrape_configs"]
    assert fleet_job["file_sd_configs"] == [{"files": ["/etc/prometheus/targets/vllm-fleet.json"]}]
    assert gateway_job["static_configs"] == [{"targets": [f"{gateway.host}:{gateway.port}"]}]
    assert gateway_job["metrics_path"] == "/metrics/"
    assert gateway_job["authorization"] == {"credentials_file": "/etc/prometheus/gateway/master-key"}
    assert monitoring.discovery_jobs(fleet_with(), metrics_target(gateway)) == {
        "interval": 5, "jobs": {"vllm-fleet": {"namespace": "vllm", "selector": "app=vllm",
                                               "port": "http"}}, "api_server": None}
    named = fleet_with(api_server="https://127.0.0.1:6440")
    assert monitoring.discovery_jobs(named, None)["api_server"] == "https://127.0.0.1:6440"


def test_a_gateway_in_the_cluster_is_discovered_pod_by_pod_in_its_namespace():
    target = metrics_target(cluster_gateway())
    config = yaml.safe_load(monitoring.server_config(fleet_with(), target, RULES))
    job = config["scrape_configs"][1]
    assert job["file_sd_configs"] == [{"files": ["/etc/prometheus/targets/spear-gateway.json"]}]
    assert "static_configs" not in job
    assert monitoring.discovery_jobs(fleet_with(), target)["jobs"]["spear-gateway"] == {
        "namespace": "spear-gateway", "selector": "app.kubernetes.io/name=spear-gateway",
        "port": "http"}


def pod(name, phase="Running", ip="10.88.0.7", port="http", track="stable"):
    return {"metadata": {"name": name, "namespace": "vllm", "labels": {"app": "vllm", "track": track}},
            "spec": {"containers": [{"ports": [{"name": port, "containerPort": 8000}]}]},
            "status": {"phase": phase, "podIP": ip}}


def test_discovery_lists_each_running_pod_with_the_port_once_labelled_with_its_track():
    pods = {"items": [pod("vllm-stable-b"), pod("vllm-canary-a", ip="10.88.0.9", track="canary"),
                      pod("pending", phase="Pending"), pod("no-ip", ip=""),
                      pod("other-port", port="metrics")]}
    assert pod_discovery.targets(pods, "http") == [
        {"targets": ["10.88.0.9:8000"], "labels": {"namespace": "vllm", "pod": "vllm-canary-a",
                                                   "track": "canary"}},
        {"targets": ["10.88.0.7:8000"], "labels": {"namespace": "vllm", "pod": "vllm-stable-b",
                                                   "track": "stable"}}]


def test_discovery_replaces_a_target_file_whole(tmp_path):
    path = str(tmp_path / "vllm-fleet.json")
    pod_discovery.write(path, [{"targets": ["a:1"], "labels": {}}])
    pod_discovery.write(path, [])
    assert json.loads(open(path).read()) == []
    assert [p.name for p in tmp_path.iterdir()] == ["vllm-fleet.json"]


def test_without_a_gateway_only_the_fleet_is_scraped():
    config = yaml.safe_load(monitoring.server_config(fleet_with(), None, RULES))
    assert [job["job_name"] for job in config["scrape_configs"]] == ["vllm-fleet"]


def test_the_bundled_server_runs_unprivileged_on_the_nodes_network_and_restarts_on_a_rule_change():
    fleet = fleet_with(port=9191)
    files = monitoring.config_files(fleet, None, RULES)
    spec = monitoring.deployment(fleet, files, "rules v1", "vllm-alerts")["spec"]
    pod_spec = spec["template"]["spec"]
    assert (pod_spec["hostNetwork"], spec["strategy"]) == (True, {"type": "Recreate"})
    server, discovery = pod_spec["containers"]
    assert server["image"] == discovery["image"] == "prom/prometheus:v2.53.0"
    assert "--web.listen-address=:9191" in server["args"]
    assert discovery["command"][:2] == ["python3", "/etc/prometheus/config/pod_discovery.py"]
    for container in (server, discovery):
        assert container["securityContext"] == {"allowPrivilegeEscalation": False,
                                                "readOnlyRootFilesystem": True,
                                                "capabilities": {"drop": ["ALL"]}}
    assert pod_spec["securityContext"]["runAsNonRoot"] is True
    assert {"name": "rules", "configMap": {"name": "vllm-alerts"}} in pod_spec["volumes"]
    assert files["pod_discovery.py"] == Path(pod_discovery.__file__).read_text()

    def digest(files, rules):
        made = monitoring.deployment(fleet, files, rules, "vllm-alerts")
        return made["spec"]["template"]["metadata"]["annotations"][monitoring.CONFIG_DIGEST]

    assert digest(files, "rules v1") == digest(dict(files), "rules v1")
    assert digest(files, "rules v2") != digest(files, "rules v1")
    assert digest({**files, "prometheus.yml": "changed"}, "rules v1") != digest(files, "rules v1")


def test_its_service_account_may_only_read_pods():
    role = monitoring.cluster_role(fleet_with())
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"],
                              "verbs": ["get", "list", "watch"]}]
    binding = monitoring.cluster_role_binding(fleet_with())
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "prometheus",
                                    "namespace": "vllm"}]


def test_the_operators_rule_holds_the_same_rules_and_every_object_the_selector_labels(tmp_path):
    fleet = fleet_with(mode="operator", image=None, selector_labels={"release": "kps"})
    hatch = host_gateway().hatch
    rules = alerts.rules(fleet.alerts, fleet.vllm.served_model_name, hatch)
    rule = monitoring.prometheus_rule(fleet, rules)
    assert (rule["api_version"], rule["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    assert rule["spec"] == yaml.safe_load(alerts.render(fleet.alerts, fleet.vllm.served_model_name,
                                                        hatch))
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(rule["spec"]))
    checked = subprocess.run(["promtool", "check", "rules", str(tmp_path / "spec.yaml")],
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    pods, gateway = monitoring.monitors(fleet, metrics_target(host_gateway()))
    for made in (rule, pods, gateway):
        assert made["metadata"]["labels"]["release"] == "kps"
    assert (pods["kind"], pods["spec"]["selector"]) == ("PodMonitor", {"matchLabels": {"app": "vllm"}})
    assert gateway["kind"] == "ScrapeConfig"
    assert gateway["spec"]["authorization"] == {
        "type": "Bearer", "credentials": {"name": "spear-gateway-metrics-key", "key": "master-key"}}
    _, in_cluster = monitoring.monitors(fleet, metrics_target(cluster_gateway()))
    assert (in_cluster["kind"], in_cluster["spec"]["namespaceSelector"]) == (
        "PodMonitor", {"matchNames": ["spear-gateway"]})


def test_the_local_stack_runs_the_image_localhosts_builds_from_this_machines_prometheus():
    prom = parse_stack(with_placeholder_keys(stack_raw("local"))).vllm_fleet.prometheus
    binary = image_files.host_binary("prometheus")
    assert (prom.mode, prom.api_server) == ("bundled", "https://127.0.0.1:6440")
    assert prom.image == f"{prometheus_image.REPOSITORY}:{image_files.reported_version(binary)}"
    entries = prometheus_image.image_entries(binary)
    assert entries[prometheus_image.BINARY][0] == "file"
    assert monitoring.RULES_DIR in entries and monitoring.KEY_DIR in entries


def test_the_local_stacks_program_runs_the_server_with_the_gateways_key_only_in_a_secret():
    program = components.run_program(components.local_raw())
    by_type = {}
    for name, typ in program.types.items():
        by_type.setdefault(typ, []).append(name)
    [secret] = [n for n in by_type["kubernetes:core/v1:Secret"] if "prometheus" in n]
    assert components.is_secret(program.registered[secret]["stringData"])
    assert program.inputs[secret]["stringData"][monitoring.GATEWAY_KEY] == MASTER_KEY
    [server] = [n for n in by_type["kubernetes:apps/v1:Deployment"] if "prometheus" in n]
    assert MASTER_KEY not in str(program.inputs[server])
    [config] = [n for n in by_type["kubernetes:core/v1:ConfigMap"] if "prometheus" in n]
    scrape = yaml.safe_load(program.inputs[config]["data"][monitoring.CONFIG_FILE])
    assert program.inputs[config]["data"][monitoring.DISCOVERY_FILE]
    assert MASTER_KEY not in str(scrape)
    assert scrape["scrape_configs"][1]["static_configs"] == [{"targets": ["127.0.0.1:4000"]}]
    assert {"kubernetes:rbac.authorization.k8s.io/v1:ClusterRole",
            "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
            "kubernetes:core/v1:ServiceAccount"} <= set(by_type)
