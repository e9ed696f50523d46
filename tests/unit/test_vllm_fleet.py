"""The vLLM fleet component under Pulumi's mocks: __main__ declares it from the stack config
(only when `vllmFleet` is), every Kubernetes object goes through the fleet's own provider, and
the objects are the cookbook's: the serve command spear/vllm.py renders, the GPU limit equal to
the tensor-parallel size, probes on /health, the key from a Secret, one Service over stable and
canary, default-deny egress for the agents."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from pulumi.runtime import rpc

from components.vllm_fleet import manifests
from config.load import parse_stack
from spear import tokens, vllm
from tests.support.config_cases import CANARY_PAIR, REVISION, STABLE_PAIR, fleet_raw, seats_raw
from tests.support.policy_harness import COOKBOOK_VLLM_COMMAND_LINE
from tests.support.stack_files import mocked_stack, prod_raw, run_main, without_fleet

SECRETS = ("spear-fleet:sshPrivateKeys", "spear-fleet:vllmApiKey")


def program(raw):
    with mocked_stack(raw, SECRETS) as mocks:
        run_main()
    return mocks


def of_type(mocks, kind) -> dict:
    return {name: args.inputs for name, args in mocks.resources.items() if args.typ == kind.type}


def container(deployment: dict) -> dict:
    [only] = deployment["spec"]["template"]["spec"]["containers"]
    return only


def test_a_stack_without_a_fleet_declares_no_kubernetes_object():
    mocks = program(without_fleet(prod_raw()))
    assert not [a for a in mocks.resources.values()
                if a.typ.startswith("kubernetes:") or a.typ == tokens.VLLM_FLEET]


def test_the_fleet_declares_its_objects_through_its_own_provider():
    mocks = program(fleet_raw())
    fleet = {name: args.typ for name, args in mocks.resources.items() if name.startswith("vllm")}
    assert fleet == {
        "vllm": tokens.VLLM_FLEET,
        "vllm-cluster": tokens.K8S_PROVIDER,
        "vllm-namespace": tokens.K8S_NAMESPACE.type,
        "vllm-api-key": tokens.K8S_SECRET.type,
        "vllm-model-cache": tokens.K8S_PVC.type,
        "vllm-rollout": tokens.K8S_CONFIG_MAP.type,
        "vllm-tenancy": tokens.K8S_CONFIG_MAP.type,
        "vllm-dashboard": tokens.K8S_CONFIG_MAP.type,
        "vllm-alerts": tokens.K8S_CONFIG_MAP.type,
        "vllm-stable": tokens.K8S_DEPLOYMENT.type,
        "vllm-service": tokens.K8S_SERVICE.type,
        "vllm-agents": tokens.K8S_NAMESPACE.type,
        "vllm-agents-deny-egress": tokens.K8S_NETWORK_POLICY.type,
        "vllm-agents-allow-egress": tokens.K8S_NETWORK_POLICY.type,
        "vllm-ingress": tokens.K8S_NETWORK_POLICY.type,
    }
    for name, args in mocks.resources.items():
        if args.typ.startswith("kubernetes:"):
            assert args.provider and "vllm-cluster" in args.provider, name


def test_every_track_takes_connections_only_from_the_gateway_and_the_scraper():
    host = manifests.fleet_ingress(parse_stack(fleet_raw()).vllm_fleet)
    spec = host["spec"]
    # Every track's pods, the canary's too: selected by the fleet's app label alone.
    assert spec["podSelector"] == {"matchLabels": {"app": "vllm"}}
    assert spec["policyTypes"] == ["Ingress"]
    [rule] = spec["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 8000}]
    assert rule["from"] == [{"ipBlock": {"cidr": "10.20.0.10/32"}}]
    # In the cluster: the gateway's pods by their labels in their namespace, nothing else.
    cluster = parse_stack(seats_raw()).vllm_fleet
    [rule] = manifests.fleet_ingress(cluster)["spec"]["ingress"]
    assert rule["from"][0] == {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "spear-gateway"}},
        "podSelector": {"matchLabels": {"app.kubernetes.io/name": "spear-gateway"}}}
    # An Operator's Prometheus scrapes from its own pods, wherever they run.
    operator = manifests.fleet_ingress(parse_stack(prod_raw()).vllm_fleet)
    assert {"namespaceSelector": {}, "podSelector": {"matchLabels": {
        "app.kubernetes.io/name": "prometheus"}}} in operator["spec"]["ingress"][0]["from"]


def test_with_nobody_declared_nothing_reaches_the_fleet():
    fleet = replace(parse_stack(fleet_raw()).vllm_fleet, ingress_from=())
    assert manifests.fleet_ingress(fleet)["spec"]["ingress"] == []


def test_the_stable_deployment_runs_the_cookbooks_serve_command_with_priority_scheduling():
    deployment = of_type(program(fleet_raw()), tokens.K8S_DEPLOYMENT)["vllm-stable"]
    main = container(deployment)
    assert main["image"] == "vllm/vllm-openai:v0.24.0"
    # The cookbook's line, and --scheduling-policy priority before --port (schedulingPriority).
    assert main["command"] == [*COOKBOOK_VLLM_COMMAND_LINE[:-2], "--scheduling-policy", "priority",
                               *COOKBOOK_VLLM_COMMAND_LINE[-2:]]
    assert main["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert main[probe]["httpGet"] == {"path": "/health", "port": "http"}
        # Not Kubernetes' 1 s: a late /health on a loaded node must not empty the Service.
        assert main[probe]["timeoutSeconds"] == 5
    assert main["env"] == [{"name": "VLLM_API_KEY", "valueFrom": {"secretKeyRef": {
        "name": "vllm-api-key", "key": "VLLM_API_KEY"}}}]
    assert not vllm.key_on_command_line(main["command"])
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    assert spec["selector"]["matchLabels"] == {"app": "vllm", "track": "stable"}
    template = spec["template"]
    assert template["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    assert template["metadata"]["annotations"]["prometheus.io/port"] == "8000"
    assert template["spec"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def test_the_key_reaches_the_secret_from_the_stacks_secret():
    mocks = program(fleet_raw())
    secret = of_type(mocks, tokens.K8S_SECRET)["vllm-api-key"]
    # Marked secret on the wire (the engine encrypts it in state and hides it in previews).
    assert secret["stringData"] == {rpc._special_sig_key: rpc._special_secret_sig,
                                    "value": {"VLLM_API_KEY": "sk-vllm-test"}}
    assert secret["metadata"] == {"name": "vllm-api-key", "namespace": "vllm"}


def test_a_canary_runs_beside_stable_behind_a_service_of_its_own():
    mocks = program(fleet_raw(canary={**CANARY_PAIR, "replicas": 1}))
    deployments = of_type(mocks, tokens.K8S_DEPLOYMENT)
    canary = deployments["vllm-canary"]
    assert canary["spec"]["replicas"] == 1
    assert canary["spec"]["selector"]["matchLabels"] == {"app": "vllm", "track": "canary"}
    main = container(canary)
    assert main["image"] == "vllm/vllm-openai:v0.25.0"
    assert vllm.flags(main["command"])["--revision"] == CANARY_PAIR["revision"]
    assert vllm.flags(container(deployments["vllm-stable"])["command"])["--revision"] == REVISION
    services = of_type(mocks, tokens.K8S_SERVICE)
    assert services["vllm-service"]["spec"]["selector"] == {"app": "vllm", "track": "stable"}
    assert services["vllm-canary-service"]["metadata"]["name"] == "vllm-canary"
    assert services["vllm-canary-service"]["spec"]["selector"] == {"app": "vllm", "track": "canary"}
    rollout = of_type(mocks, tokens.K8S_CONFIG_MAP)["vllm-rollout"]["data"]
    assert json.loads(rollout["canary.json"])["tag"] == "v0.25.0"
    assert json.loads(rollout["stable.json"]) == {**STABLE_PAIR, "digest": None}


def test_the_agent_namespace_denies_egress_and_allows_exactly_its_mirrors_without_dns():
    policies = of_type(program(fleet_raw()), tokens.K8S_NETWORK_POLICY)
    deny = policies["vllm-agents-deny-egress"]
    assert deny["metadata"]["namespace"] == "agents"
    assert deny["spec"] == {"podSelector": {}, "policyTypes": ["Egress"]}
    # This stack has no gateway: the mirror is the one way out.
    assert policies["vllm-agents-allow-egress"]["spec"]["egress"] == [
        {"to": [{"ipBlock": {"cidr": "10.20.1.0/24"}}], "ports": [{"protocol": "TCP", "port": 443}]}]


def test_a_node_path_cache_gets_its_own_volume_bound_to_the_claim():
    mocks = program(fleet_raw(modelCache={"size": "1Gi", "hostPath": "/var/lib/spear-models",
                                          "accessMode": "ReadWriteOnce"}))
    volume = of_type(mocks, tokens.K8S_PV)["vllm-model-cache-volume"]
    claim = of_type(mocks, tokens.K8S_PVC)["vllm-model-cache"]
    assert volume["spec"]["hostPath"]["path"] == "/var/lib/spear-models"
    assert claim["spec"]["volumeName"] == volume["metadata"]["name"]
    assert claim["spec"]["storageClassName"] == ""


@pytest.mark.parametrize("priority,expected", [(True, {"interactive": 0, "background": 10}),
                                               (False, {})])
def test_the_tenancy_record_says_what_the_gateway_injects(priority, expected):
    mocks = program(fleet_raw(schedulingPriority=priority, tenancy={"cacheSalt": "developer"}))
    data = of_type(mocks, tokens.K8S_CONFIG_MAP)["vllm-tenancy"]["data"]
    assert data == {"cacheSalt": "developer", "priorities": json.dumps(expected)}
    argv = container(of_type(mocks, tokens.K8S_DEPLOYMENT)["vllm-stable"])["command"]
    assert vllm.priority_scheduling(argv) is priority


def test_a_replaced_pod_keeps_serving_until_kube_proxy_has_dropped_it_then_drains():
    deployment = of_type(program(fleet_raw()), tokens.K8S_DEPLOYMENT)["vllm-stable"]
    pod = deployment["spec"]["template"]["spec"]
    assert container(deployment)["lifecycle"] == {"preStop": {"sleep": {"seconds": 15}}}
    assert pod["terminationGracePeriodSeconds"] > 15


def test_the_rollout_output_carries_the_deployed_canary_pair_that_scripts_gate_pins():
    with_canary = parse_stack(fleet_raw(canary={**CANARY_PAIR, "replicas": 1})).vllm_fleet
    assert manifests.rollout_pairs(with_canary)["canary"] == CANARY_PAIR
    assert manifests.rollout_pairs(parse_stack(fleet_raw()).vllm_fleet)["canary"] is None
