"""config, the vLLM fleet on Kubernetes: every bad value under `vllmFleet`, `kubeconfig` and
`vllmApiKey` is refused with the full key, what was given and what is allowed, all at once and
before any resource is registered; a promotion without a passing gate record is refused the
same way (spear/rollout_gate.py), and the kubeconfig is a Pulumi secret."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from components.agent_seats.manifests import GatewayTrust
from components.vllm_fleet import manifests
from config.checker import ConfigError
from config.load import StackConfigError, load
from config.load import parse_stack
from config.types import EgressTarget, Kubeconfig, Prometheus, ServingPair, Vllm
from spear.vllm import command_line as vllm_command_line
from tests.support import tls
from tests.support.config_cases import (CANARY_PAIR, DELETE, FLEET, FLEET_SECRETS as SECRETS,
                                        NEXT_REVISION, REVISION, STABLE_PAIR, allowed_for, changed,
                                        fleet_raw, problem_line, promoted_raw,
                                        repeated_cases, run_program, seats_raw, gateway_raw,
                                        MASTER_KEY, FRONTIER_KEY, BACKUP_KEY)
from tests.support.stack_files import (DUMMY_KEY, PLACEHOLDER_SECRETS, engine_config, prod_raw,
                                       without_fleet)

KUBECONFIG = "apiVersion: v1\nclusters: []\nusers: []\ncontexts: []\n"
STABLE = (*FLEET, "stable")
SANDBOX = (*FLEET, "agentSandbox")
ALERTS = (*FLEET, "observability")


# (id, config, full key without the namespace, a fragment of what is allowed)
def gateway_raw_to_fleet() -> dict[str, Any]:
    """The prod example's gateway host, routing coder to the test fleet."""
    raw = {**gateway_raw(), **{k: v for k, v in fleet_raw().items() if k in ("vllmFleet", "vllmApiKey")}}
    raw["gateway"]["coder"]["upstreams"].append("vllmFleet")
    raw["vllmFleet"]["serviceIPs"] = {"stable": "10.96.100.10"}
    return raw


BAD = [
    ("ingress-from-missing-for-a-gateway-host",
     changed(gateway_raw_to_fleet(), ("vllmFleet", "ingressFrom"), DELETE),
     "vllmFleet.ingressFrom", "the addresses the vLLM pods see the gateway host"
     " (gateway.coder.upstreams names vllmFleet) connect from"),
    ("ingress-from-missing-for-the-bundled-prometheus",
     changed(fleet_raw(observability={"prometheus": {"mode": "bundled",
                                                     "image": "prom/prometheus:v2.53.0"}}),
             ("vllmFleet", "ingressFrom"), DELETE),
     "vllmFleet.ingressFrom", "the bundled Prometheus, on the node's network"),
    ("ingress-from-too-wide", fleet_raw(ingressFrom=["10.0.0.0/8"]),
     "vllmFleet.ingressFrom[0]", "one host or one subnet"),
    ("ingress-from-a-name", fleet_raw(ingressFrom=["gateway.internal"]),
     "vllmFleet.ingressFrom[0]", "an IP network, e.g. 10.0.0.5/32"),
    ("ingress-from-not-a-list", fleet_raw(ingressFrom="10.20.0.10/32"),
     "vllmFleet.ingressFrom", "a list of IP networks"),
    ("tool-parser-unknown", fleet_raw(toolCallParser="hermes"),
     "vllmFleet.toolCallParser", "one of qwen3_coder, qwen3_xml"),
    ("tool-parser-alias-on-an-older-previous-pair",
     fleet_raw(toolCallParser="qwen3_xml", previous={**STABLE_PAIR, "tag": "v0.23.1"}),
     "vllmFleet.toolCallParser", "a name the previous pair's engine (v0.23.1) gives the Qwen3-Coder"
     " parser: 'qwen3_xml' names the Qwen3-Coder parser only from v0.24.0"),
    ("service-ip-not-an-ip", fleet_raw(serviceIPs={"stable": "vllm.internal"}),
     "vllmFleet.serviceIPs.stable", "an IP address in the cluster's service range"),
    ("service-ip-twice", fleet_raw(canary={**CANARY_PAIR, "replicas": 1},
                                   serviceIPs={"stable": "10.96.0.50", "canary": "10.96.0.50"}),
     "vllmFleet.serviceIPs.canary", "an address no other track's Service has"),
    ("service-ip-canary-missing", fleet_raw(canary={**CANARY_PAIR, "replicas": 1},
                                            serviceIPs={"stable": "10.96.0.50"}),
     "vllmFleet.serviceIPs.canary", "the canary Service's cluster IP"),
    ("service-ip-unknown-track", fleet_raw(serviceIPs={"stable": "10.96.0.50", "pilot": "10.96.0.51"}),
     "vllmFleet.serviceIPs.pilot", "one of stable, canary"),
    ("tag-latest", changed(fleet_raw(), (*STABLE, "tag"), "latest"),
     "vllmFleet.stable.tag", "not latest: it moves"),
    ("tag-missing", changed(fleet_raw(), (*STABLE, "tag"), DELETE),
     "vllmFleet.stable.tag", "(required)"),
    ("digest-short", changed(fleet_raw(), (*STABLE, "digest"), "sha256:abc"),
     "vllmFleet.stable.digest", "sha256:<64 lowercase hex>"),
    ("revision-branch", changed(fleet_raw(), (*STABLE, "revision"), "main"),
     "vllmFleet.stable.revision", "a branch or tag name is refused"),
    ("revision-short", changed(fleet_raw(), (*STABLE, "revision"), "da6e2ed"),
     "vllmFleet.stable.revision", "40 lowercase hex"),
    ("model-not-a-repo", changed(fleet_raw(), (*STABLE, "model"), "qwen3"),
     "vllmFleet.stable.model", "a Hugging Face repository id"),
    ("pair-unknown-key", changed(fleet_raw(), (*STABLE, "quantization"), "fp8"),
     "vllmFleet.stable.quantization", "one of tag, digest, model, revision"),
    ("stable-missing", changed(fleet_raw(), STABLE, DELETE),
     "vllmFleet.stable", "an object with keys tag, digest, model, revision (required)"),
    ("image-with-tag", changed(fleet_raw(), (*FLEET, "image"), "vllm/vllm-openai:latest"),
     "vllmFleet.image", "an image repository without tag or digest"),
    ("canary-same-as-stable", changed(fleet_raw(), (*FLEET, "canary"), STABLE_PAIR),
     "vllmFleet.canary", "a pair other than stable's"),
    ("canary-replicas-zero", changed(fleet_raw(), (*FLEET, "canary"), {**CANARY_PAIR, "replicas": 0}),
     "vllmFleet.canary.replicas", "an integer >= 1"),
    ("canary-tag-latest", changed(fleet_raw(), (*FLEET, "canary"), {**CANARY_PAIR, "tag": "latest"}),
     "vllmFleet.canary.tag", "not latest"),
    ("canary-unknown-key", changed(fleet_raw(), (*FLEET, "canary"), {**CANARY_PAIR, "weight": 10}),
     "vllmFleet.canary.weight", "one of tag, digest, model, revision, replicas"),
    ("previous-revision", changed(fleet_raw(), (*FLEET, "previous"), {**STABLE_PAIR, "revision": "x"}),
     "vllmFleet.previous.revision", "40 lowercase hex"),
    ("replicas-zero", changed(fleet_raw(), (*FLEET, "replicas"), 0),
     "vllmFleet.replicas", "an integer >= 1"),
    ("tp-zero", changed(fleet_raw(), (*FLEET, "tensorParallelSize"), 0),
     "vllmFleet.tensorParallelSize", "an integer >= 1"),
    ("max-model-len-missing", changed(fleet_raw(), (*FLEET, "maxModelLen"), DELETE),
     "vllmFleet.maxModelLen", "no default: state it in the stack"),
    ("gpu-memory-over-one", changed(fleet_raw(), (*FLEET, "gpuMemoryUtilization"), 1.2),
     "vllmFleet.gpuMemoryUtilization", "a number > 0 and <= 1"),
    ("served-name-space", changed(fleet_raw(), (*FLEET, "servedModelName"), "qwen 3"),
     "vllmFleet.servedModelName", "a model name"),
    ("scheduling-not-bool", changed(fleet_raw(), (*FLEET, "schedulingPriority"), "yes"),
     "vllmFleet.schedulingPriority", "true or false"),
    ("namespace-upper", changed(fleet_raw(), (*FLEET, "namespace"), "VLLM"),
     "vllmFleet.namespace", "a DNS-1123 label"),
    ("kwok-era-key", changed(fleet_raw(), (*FLEET, "tolerateFakeNodes"), True),
     "vllmFleet.tolerateFakeNodes", "one of"),
    ("cache-salt", changed(fleet_raw(), (*FLEET, "tenancy", "cacheSalt"), "global"),
     "vllmFleet.tenancy.cacheSalt", "one of team, developer"),
    ("model-cache-size", changed(fleet_raw(), (*FLEET, "modelCache", "size"), "200GB"),
     "vllmFleet.modelCache.size", "a Kubernetes quantity"),
    ("model-cache-missing", changed(fleet_raw(), (*FLEET, "modelCache"), DELETE),
     "vllmFleet.modelCache", "an object with keys size"),
    ("model-cache-mode", changed(fleet_raw(), (*FLEET, "modelCache", "accessMode"), "ReadOnlyMany"),
     "vllmFleet.modelCache.accessMode", "one of ReadWriteMany, ReadWriteOnce"),
    ("model-cache-host-path", changed(fleet_raw(), (*FLEET, "modelCache", "hostPath"), "models"),
     "vllmFleet.modelCache.hostPath", "an absolute path on the node"),
    ("sandbox-mirror-name-not-address", changed(fleet_raw(), (*SANDBOX, "mirrors", "pypi", "cidr"),
                                                "pypi.internal"),
     "vllmFleet.agentSandbox.mirrors.pypi.cidr", "an IP network"),
    ("sandbox-mirror-host-bits", changed(fleet_raw(), (*SANDBOX, "mirrors", "pypi", "cidr"), "10.20.1.7/24"),
     "vllmFleet.agentSandbox.mirrors.pypi.cidr", "an IP network"),
    ("sandbox-open-to-everything", changed(fleet_raw(), (*SANDBOX, "mirrors", "pypi", "cidr"), "0.0.0.0/0"),
     "vllmFleet.agentSandbox.mirrors.pypi.cidr", "one host or one subnet: an IPv4 network of /24 or"
     " narrower"),
    ("sandbox-mirror-wide-v6", changed(fleet_raw(), (*SANDBOX, "mirrors", "pypi", "cidr"), "2001:db8::/32"),
     "vllmFleet.agentSandbox.mirrors.pypi.cidr", "IPv6 of /64 or narrower"),
    ("sandbox-ports-empty", changed(fleet_raw(), (*SANDBOX, "mirrors", "pypi", "ports"), []),
     "vllmFleet.agentSandbox.mirrors.pypi.ports", "a non-empty list of TCP ports"),
    ("sandbox-port-big", changed(fleet_raw(), (*SANDBOX, "mirrors", "pypi", "ports"), [70000]),
     "vllmFleet.agentSandbox.mirrors.pypi.ports[0]", "an integer 1-65535"),
    ("sandbox-gateway-typed-twice", changed(fleet_raw(), (*SANDBOX, "gateway"),
                                            {"cidr": "10.20.0.10/32", "ports": [4000]}),
     "vllmFleet.agentSandbox.gateway", "nothing: the sandbox's way to the gateway is taken from"
     " `gateway` (its pods when it runs in the cluster, its listen address on a host)"),
    ("sandbox-mirror-name", changed(fleet_raw(), (*SANDBOX, "mirrors", "PyPI"), {}),
     "vllmFleet.agentSandbox.mirrors.PyPI", "a name of lowercase letters"),
    ("hatch-cap-declared-twice", changed(fleet_raw(), (*ALERTS, "hatchCapUsd"), 500),
     "vllmFleet.observability.hatchCapUsd", "nothing: the hatch is declared once, its"
     " gateway.hatch.monthlyCapUsd drives the gateway's cap, the spend alert rule"),
    ("hatch-alert-declared-twice", changed(fleet_raw(), (*ALERTS, "hatchSpendAlertUsd"), 400),
     "vllmFleet.observability.hatchSpendAlertUsd", "its gateway.hatch.alertUsd drives"),
    ("itl-zero", changed(fleet_raw(), (*ALERTS, "itlP95Seconds"), 0),
     "vllmFleet.observability.itlP95Seconds", "a number > 0"),
    ("hit-rate-over-one", changed(fleet_raw(), (*ALERTS, "prefixCacheHitRateMin"), 1.5),
     "vllmFleet.observability.prefixCacheHitRateMin", "a number >= 0 and <= 1"),
    ("escalations-zero", changed(fleet_raw(), (*ALERTS, "hatchEscalationsPerHour"), 0),
     "vllmFleet.observability.hatchEscalationsPerHour", "an integer >= 1"),
    ("throughput-ratio-zero", changed(fleet_raw(), (*ALERTS, "throughputMinRatio"), 0),
     "vllmFleet.observability.throughputMinRatio", "a number > 0 and <= 1"),
    ("throughput-ratio-over-one", changed(fleet_raw(), (*ALERTS, "throughputMinRatio"), 1.2),
     "vllmFleet.observability.throughputMinRatio", "a number > 0 and <= 1"),
    ("prometheus-mode-unknown", changed(fleet_raw(), (*ALERTS, "prometheus"), {"mode": "victoria"}),
     "vllmFleet.observability.prometheus.mode", "one of none, bundled, operator"),
    ("prometheus-bundled-without-image", changed(fleet_raw(), (*ALERTS, "prometheus"),
                                                 {"mode": "bundled"}),
     "vllmFleet.observability.prometheus.image", "a pinned Prometheus image"),
    ("prometheus-image-latest", changed(fleet_raw(), (*ALERTS, "prometheus"),
                                        {"mode": "bundled", "image": "prom/prometheus:latest"}),
     "vllmFleet.observability.prometheus.image", "a version tag (not latest)"),
    ("prometheus-port-for-the-operator", changed(fleet_raw(), (*ALERTS, "prometheus"),
                                                 {"mode": "operator", "port": 9090}),
     "vllmFleet.observability.prometheus.port", "one of mode, scrapeIntervalSeconds, selectorLabels"),
    ("prometheus-interval-zero", changed(fleet_raw(), (*ALERTS, "prometheus"),
                                         {"mode": "operator", "scrapeIntervalSeconds": 0}),
     "vllmFleet.observability.prometheus.scrapeIntervalSeconds", "an integer 1-300"),
    ("prometheus-retention-minutes", changed(fleet_raw(), (*ALERTS, "prometheus"),
                                             {"mode": "bundled", "image": "prom/prometheus:v2.53.0",
                                              "retention": "90m"}),
     "vllmFleet.observability.prometheus.retention", "a duration in hours, days, weeks or years"),
    ("prometheus-api-server-plain-http", changed(fleet_raw(), (*ALERTS, "prometheus"),
                                                 {"mode": "bundled", "image": "prom/prometheus:v2.53.0",
                                                  "apiServer": "http://10.0.0.1:6443"}),
     "vllmFleet.observability.prometheus.apiServer", "the API server's https URL"),
    ("prometheus-selector-label-bad", changed(fleet_raw(), (*ALERTS, "prometheus"),
                                              {"mode": "operator", "selectorLabels": {"release": "a b"}}),
     "vllmFleet.observability.prometheus.selectorLabels", "a map of Kubernetes labels"),
    ("fleet-unknown-key", changed(fleet_raw(), (*FLEET, "quantization"), "fp8"),
     "vllmFleet.quantization", "one of kubeconfig, context, namespace"),
    ("kubeconfig-relative", changed(fleet_raw(), (*FLEET, "kubeconfig"), "kube/config"),
     "vllmFleet.kubeconfig", "ambient ($KUBECONFIG or ~/.kube/config"),
    ("kubeconfig-secret-missing", changed(fleet_raw(), (*FLEET, "kubeconfig"), "secret"),
     "kubeconfig", "a secret (required with vllmFleet.kubeconfig: secret)"),
    ("kubeconfig-unused", changed(fleet_raw(), ("kubeconfig",), KUBECONFIG),
     "kubeconfig", "nothing unless vllmFleet.kubeconfig is secret"),
    ("kubeconfig-not-yaml", changed(changed(fleet_raw(), (*FLEET, "kubeconfig"), "secret"),
                                    ("kubeconfig",), "hunter2"),
     "kubeconfig", "a kubeconfig (YAML with clusters"),
    ("api-key-missing", changed(fleet_raw(), ("vllmApiKey",), DELETE),
     "vllmApiKey", "a secret (required with vllmFleet)"),
    ("promotion-without-record", promoted_raw(),
     "vllmFleet.stable", "no gate record pins exactly v0.25.0 @ Qwen/Qwen3-Coder-Next-FP8 revision 1234567"),
]


@pytest.mark.parametrize("raw,key,allowed", [case[1:] for case in BAD], ids=[case[0] for case in BAD])
def test_a_bad_fleet_value_is_refused_naming_key_and_allowed(mocks, raw, key, allowed):
    assert allowed in allowed_for(mocks, raw, key, SECRETS)


def test_no_two_bad_fleet_cases_share_an_id_or_a_refusal():
    assert repeated_cases(BAD) == []


def test_the_fleet_parses_to_its_typed_config():
    fleet = parse_stack(fleet_raw()).vllm_fleet
    assert fleet.kubeconfig == Kubeconfig(None, None, None)
    assert (fleet.namespace, fleet.image, fleet.replicas) == ("vllm", "vllm/vllm-openai", 2)
    assert fleet.stable == ServingPair(tag="v0.24.0", digest=None,
                                       model="Qwen/Qwen3-Coder-Next-FP8", revision=REVISION)
    assert (fleet.previous, fleet.canary, fleet.gate_records) == (None, None, ())
    assert fleet.vllm == Vllm(model="Qwen/Qwen3-Coder-Next-FP8", revision=REVISION,
                              served_model_name="qwen3-coder-next", tensor_parallel_size=2,
                              max_model_len=262144, port=8000, gpu_memory_utilization="0.90",
                              scheduling_priority=True)
    assert fleet.image_ref(fleet.stable) == "vllm/vllm-openai:v0.24.0"
    assert fleet.cache_salt == "team"
    assert (fleet.model_cache.size, fleet.model_cache.access_mode) == ("200Gi", "ReadWriteMany")
    sandbox = fleet.agent_sandbox
    assert (sandbox.namespace, sandbox.gateway) == ("agents", None)  # this stack has no gateway
    assert [(m.name, m.cidr, m.ports) for m in sandbox.mirrors] == [("pypi", "10.20.1.0/24", (443,))]
    alerts = fleet.alerts
    assert (alerts.preemptions_per_hour, alerts.ttft_p95_seconds, alerts.itl_p95_seconds,
            alerts.prefix_cache_hit_rate_min, alerts.hatch_escalations_per_hour) == (
        30, 2.0, 0.1, 0.3, 20)
    assert alerts.throughput_min_ratio is None  # recorded, never refused, unless the stack says
    ratio = parse_stack(changed(fleet_raw(), (*ALERTS, "throughputMinRatio"), 0.8)).vllm_fleet.alerts
    assert ratio.throughput_min_ratio == 0.8


def test_prometheus_defaults_to_none_and_each_mode_keeps_only_its_own_settings():
    assert parse_stack(fleet_raw()).vllm_fleet.prometheus == Prometheus(mode="none",
                                                                   scrape_interval_seconds=30)
    bundled = parse_stack(changed(fleet_raw(), (*ALERTS, "prometheus"), {
        "mode": "bundled", "image": "prom/prometheus:v2.53.0", "port": 9191,
        "scrapeIntervalSeconds": 5})).vllm_fleet.prometheus
    assert bundled == Prometheus(mode="bundled", scrape_interval_seconds=5,
                                 image="prom/prometheus:v2.53.0", port=9191, retention="15d")
    operator = parse_stack(prod_raw()).vllm_fleet.prometheus
    assert operator == Prometheus(mode="operator", scrape_interval_seconds=30,
                                  selector_labels={"release": "kube-prometheus-stack"})


def test_the_parsers_alias_is_taken_on_an_engine_that_gives_it_and_rendered():
    fleet = parse_stack(fleet_raw(toolCallParser="qwen3_xml")).vllm_fleet
    assert fleet.vllm.tool_call_parser == "qwen3_xml"
    argv = vllm_command_line(fleet.vllm)
    assert argv[argv.index("--tool-call-parser") + 1] == "qwen3_xml"


def test_a_canary_serves_its_own_pair_with_the_fleets_other_settings():
    fleet = parse_stack(fleet_raw(canary={**CANARY_PAIR, "replicas": 1,
                                    "digest": "sha256:" + "a" * 64})).vllm_fleet
    assert fleet.canary.replicas == 1
    assert fleet.image_ref(fleet.canary.pair) == "vllm/vllm-openai:v0.25.0@sha256:" + "a" * 64
    serve = fleet.serve(fleet.canary.pair)
    assert (serve.revision, serve.served_model_name, serve.tensor_parallel_size) == (
        NEXT_REVISION, "qwen3-coder-next", 2)


def test_a_rollback_to_the_previous_pair_needs_no_record():
    fleet = parse_stack(fleet_raw(stable=STABLE_PAIR, previous=STABLE_PAIR)).vllm_fleet
    assert fleet.stable == fleet.previous


def host_gateway_raw(**seats: Any) -> dict[str, Any]:
    """The test fleet beside prod's gateway host (on loopback); `seats` in its sandbox."""
    raw = seats_raw(**seats) if seats else fleet_raw()
    gateway = gateway_raw()["gateway"]
    raw["gateway"] = {**gateway, "listen": {"host": "127.0.0.1", "port": 4000}}
    raw["sshPrivateKeys"]["gateway"] = DUMMY_KEY
    for key in ("gatewayDatabaseUrl", "gatewayTlsCertificate", "gatewayTlsKey"):
        raw.pop(key, None)
    return {**raw, "gatewayMasterKey": MASTER_KEY, "frontierApiKey": FRONTIER_KEY,
            "gatewayBackupKey": BACKUP_KEY}


def test_a_gateway_host_on_loopback_is_no_way_out_and_seats_need_its_https_listener():
    assert parse_stack(host_gateway_raw()).vllm_fleet.agent_sandbox.gateway is None
    # Plain HTTP only on loopback: seats cannot use a gateway host without its TLS listener.
    with pytest.raises(ConfigError) as error:
        parse_stack(host_gateway_raw(**{"ana-codex": {"developer": "ana", "harness": "codex"}}))
    assert problem_line(error.value, "gateway.listen.tls").endswith(
        "got nothing; allowed: the gateway host's TLS listener, required with agent seats: a seat"
        " reaches the gateway by name over TLS (gateway.listen.tls.name, .address, .port,"
        " gatewayTlsCertificate, gatewayTlsKey); its loopback HTTP reaches no pod")


def with_listener(raw: dict[str, Any], **listener: Any) -> dict[str, Any]:
    """raw's gateway host with an HTTPS listener for gateway.spear.internal (and its pair)."""
    raw["gateway"]["listen"]["tls"] = {"name": "gateway.spear.internal", "address": "10.20.0.10",
                                       "port": 4443, **listener}
    bundle, key = tls.issue("gateway.spear.internal")
    return {**raw, "gatewayTlsCertificate": bundle, "gatewayTlsKey": key}


def test_seats_reach_a_gateway_host_only_at_its_https_listeners_address_and_port():
    raw = with_listener(host_gateway_raw(**{"ana-codex": {"developer": "ana", "harness": "codex"}}))
    config = parse_stack(raw)
    assert config.vllm_fleet.agent_sandbox.gateway == EgressTarget("gateway", "10.20.0.10/32", (4443,))
    trust = GatewayTrust.of(config.gateway)
    assert (trust.name, trust.address) == ("gateway.spear.internal", "10.20.0.10")
    assert trust.root_pem in raw["gatewayTlsCertificate"]


def test_the_https_listener_is_never_on_loopback_and_its_certificate_must_name_it():
    raw = with_listener(host_gateway_raw(), address="127.0.0.1")
    raw["gateway"]["listen"]["tls"]["name"] = "other.spear.internal"
    with pytest.raises(ConfigError) as error:
        parse_stack(raw)
    assert problem_line(error.value, "gateway.listen.tls.address").endswith(
        "got '127.0.0.1'; allowed: an IP address of the gateway host other than loopback, which"
        " the seats' pods and developers reach (loopback is gateway.listen.host)")
    raw = with_listener(host_gateway_raw())
    raw["gateway"]["listen"]["tls"]["name"] = "other.spear.internal"
    with pytest.raises(ConfigError) as error:
        parse_stack(raw)
    assert "a certificate whose subject alternative names hold other.spear.internal" \
        " (gateway.listen.tls.name)" in problem_line(error.value, "gatewayTlsCertificate")


def test_all_fleet_problems_are_reported_at_once_one_per_line():
    raw = changed(fleet_raw(), (*STABLE, "tag"), "latest")
    raw = changed(raw, (*FLEET, "replicas"), 0)
    raw = changed(raw, (*SANDBOX, "mirrors", "pypi", "cidr"), "pypi")
    raw = changed(raw, ("vllmApiKey",), DELETE)
    with pytest.raises(ConfigError) as error:
        parse_stack(raw)
    assert [problem.key for problem in error.value.problems] == [
        "spear-fleet:vllmApiKey", "spear-fleet:vllmFleet.stable.tag",
        "spear-fleet:vllmFleet.replicas", "spear-fleet:vllmFleet.agentSandbox.mirrors.pypi.cidr"]


def test_a_stack_without_a_fleet_has_none_and_needs_no_kubeconfig():
    assert parse_stack(without_fleet(prod_raw())).vllm_fleet is None


def test_prods_fleet_is_the_cookbooks_pair_on_a_cluster_named_by_its_kubeconfig_secret():
    fleet = parse_stack(prod_raw()).vllm_fleet
    assert fleet.kubeconfig.secret_text == PLACEHOLDER_SECRETS["kubeconfig"]
    assert fleet.stable == ServingPair(tag="v0.24.0", digest=None,
                                       model="Qwen/Qwen3-Coder-Next-FP8", revision=REVISION)
    assert fleet.vllm == Vllm(model="Qwen/Qwen3-Coder-Next-FP8", revision=REVISION,
                              served_model_name="qwen3-coder-next", tensor_parallel_size=2,
                              max_model_len=262144, port=8000, gpu_memory_utilization="0.90",
                              scheduling_priority=True)
    assert (fleet.canary, fleet.previous, fleet.gate_records) == (None, None, ())


def test_a_kubeconfig_file_is_expanded_and_a_secret_is_never_shown(monkeypatch):
    monkeypatch.setenv("HOME", "/home/op")
    fleet = parse_stack(fleet_raw(kubeconfig="~/kube/config", context="kind-spear")).vllm_fleet
    assert fleet.kubeconfig == Kubeconfig(None, "/home/op/kube/config", "kind-spear")
    secret = changed(fleet_raw(kubeconfig="secret"), ("kubeconfig",), KUBECONFIG)
    assert "clusters" not in repr(parse_stack(secret))


def test_the_kubeconfig_in_plain_text_is_refused(mocks):
    raw = changed(fleet_raw(kubeconfig="secret"), ("kubeconfig",), KUBECONFIG)
    with pytest.raises(StackConfigError) as error:
        run_program(engine_config(raw), ["spear-fleet:sshPrivateKeys", "spear-fleet:vllmApiKey"])
    assert mocks.registered == []
    assert problem_line(error.value, "kubeconfig") == (
        "spear-fleet:kubeconfig: got a plain-text value; allowed: a secret: pulumi config set"
        " --secret kubeconfig < file")


def test_the_loaded_kubeconfig_is_a_secret_output(mocks):
    raw = changed(fleet_raw(kubeconfig="secret"), ("kubeconfig",), KUBECONFIG)
    pulumi.runtime.set_all_config(engine_config(raw), SECRETS)
    seen = []

    @pulumi.runtime.test
    def program():
        stack = load()
        return pulumi.Output.all(stack.kubeconfig.is_secret(), stack.kubeconfig).apply(seen.append)

    program()
    assert seen == [[True, KUBECONFIG]]


def test_the_local_stacks_fleet_points_at_the_local_clusters_kubeconfig(monkeypatch):
    from localhosts.kube.kubecluster import LOCAL_CLUSTER, state_dir
    from tests.support.stack_files import stack_raw, with_placeholder_keys

    monkeypatch.delenv("SPEAR_CACHE", raising=False)  # the stack names the default cache
    fleet = parse_stack(with_placeholder_keys(stack_raw("local"))).vllm_fleet
    assert fleet.kubeconfig.path == str(state_dir(LOCAL_CLUSTER) / "kubeconfig")
    assert fleet.model_cache.host_path


def test_a_gateway_routing_to_the_fleet_needs_its_service_ips_known_at_preview(monkeypatch):
    from config.checker import ConfigError
    from tests.support.stack_files import stack_raw, with_placeholder_keys

    monkeypatch.delenv("SPEAR_CACHE", raising=False)
    raw = with_placeholder_keys(stack_raw("local"))
    assert parse_stack(raw).gateway.upstreams == ("local", "vllmFleet")
    del raw["vllmFleet"]["serviceIPs"]
    with pytest.raises(ConfigError) as refused:
        parse_stack(raw)
    assert ("spear-fleet:vllmFleet.serviceIPs: got nothing; allowed: each track's Service IP"
            in str(refused.value))


FACTS = {"parametersBillions": 80, "precision": "fp8", "kvCacheBytesPerToken": 24576}


def floor(**facts) -> dict:
    """GPUs of 80 GiB; the model at FP8 is 74.5 GiB, 262144 tokens of KV cache 6 GiB: with the test
    fleet's two GPUs at 0.90 (144 GiB) it fits."""
    return {"gpuMemoryGiB": 80, "models": {"Qwen/Qwen3-Coder-Next-FP8": {**FACTS, **facts}}}


def test_a_pair_whose_weights_and_kv_cache_fit_the_gpus_passes_the_memory_floor():
    fleet = parse_stack(fleet_raw(memoryFloor=floor())).vllm_fleet
    assert fleet.memory_floor.models["Qwen/Qwen3-Coder-Next-FP8"].precision == "fp8"


@pytest.mark.parametrize("change,said", [
    ({"memoryFloor": floor(precision="bf16")},
     "149.0 GiB of bf16 weights and 6.0 GiB of KV cache for 262144 tokens need more than the"
     " 144.0 GiB vLLM may use (2 x 80 GiB x 0.9)"),
    ({"memoryFloor": floor(kvCacheBytesPerToken=300_000)},
     "of KV cache for 262144 tokens need more than the 144.0 GiB"),
    ({"memoryFloor": floor(), "tensorParallelSize": 1},
     "need more than the 72.0 GiB vLLM may use (1 x 80 GiB x 0.9)"),
])
def test_a_precision_context_or_gpu_change_that_cannot_fit_is_refused_before_anything_runs(
        change, said):
    with pytest.raises(ConfigError) as refused:
        parse_stack(fleet_raw(**change))
    line = problem_line(refused.value, "vllmFleet.stable")
    assert "Qwen/Qwen3-Coder-Next-FP8 at 262144 tokens on" in line and said in line
    assert "allowed: a pair, precision, maxModelLen, tensorParallelSize or gpuMemoryUtilization" \
           " whose weights and KV cache fit" in line


def test_a_canary_of_a_model_without_declared_facts_is_refused():
    raw = fleet_raw(memoryFloor=floor(), canary={**CANARY_PAIR, "model": "Qwen/Other-FP8",
                                                 "replicas": 1},
                    serviceIPs={"stable": "10.96.0.50", "canary": "10.96.0.51"})
    with pytest.raises(ConfigError) as refused:
        parse_stack(raw)
    assert "no facts for Qwen/Other-FP8 (the canary pair's model)" in problem_line(
        refused.value, "vllmFleet.memoryFloor.models")
