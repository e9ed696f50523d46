"""gateway.kubernetes.tls: the gateway in the cluster serves HTTPS under a name, with the stack's
certificate and key (secrets), which the config checks before any resource exists (config/tls.py)
and never echoes; its pods, its Prometheus scrape and its seats then use that name and trust
the bundle's root."""

from __future__ import annotations

import datetime
import json

import pytest

from components.gateway import cluster_manifests, metrics_target
from components.vllm_fleet import monitoring
from config.checker import ConfigError
from config.load import parse_stack
from config.tls import root_certificate
from spear import harness
from tests.support import tls
from tests.support.config_cases import (SEAT_SECRETS, SEATS_GATEWAY_NAME, SEATS_GATEWAY_URL,
                                        SEATS_TLS_CERTIFICATE, problem_line, seats_raw)
from tests.unit.test_gateway_components import run_program


def problems(raw) -> str:
    with pytest.raises(ConfigError) as error:
        parse_stack(raw)
    return str(error.value)


def test_a_certificate_for_the_name_with_its_key_and_root_is_taken_and_its_root_is_what_clients_trust():
    place = parse_stack(seats_raw()).gateway.kubernetes
    assert place.tls.name == SEATS_GATEWAY_NAME
    assert place.tls.root_pem.startswith("-----BEGIN CERTIFICATE-----")
    assert SEATS_TLS_CERTIFICATE.endswith(place.tls.root_pem)
    assert place.tls.root_pem not in SEATS_TLS_CERTIFICATE.split("-----END CERTIFICATE-----")[0]


def test_a_certificate_for_another_name_another_key_and_no_root_are_each_refused_at_once():
    other_bundle, other_key = tls.issue("elsewhere.example")
    leaf_only = SEATS_TLS_CERTIFICATE[:SEATS_TLS_CERTIFICATE.index("-----END CERTIFICATE-----") + 26]
    said = problems({**seats_raw(), "gatewayTlsCertificate": other_bundle})
    assert problem_line(said, "gatewayTlsCertificate").endswith(
        "got a certificate for elsewhere.example; allowed: a certificate whose subject alternative"
        " names hold gateway.spear.internal (gateway.kubernetes.tls.name)")
    # The key of another certificate, and a bundle without its root, in one run.
    said = problems({**seats_raw(), "gatewayTlsCertificate": leaf_only, "gatewayTlsKey": other_key})
    assert "gatewayTlsCertificate: got a chain ending in CN=gateway.spear.internal, which is not" \
           " self-signed" in said
    assert problem_line(said, "gatewayTlsKey").endswith(
        "got the key of another certificate; allowed: the PEM private key of the first"
        " certificate in gatewayTlsCertificate")
    # The secrets are described, never echoed.
    assert "PRIVATE KEY" not in said and "BEGIN CERTIFICATE" not in said


def test_an_expired_certificate_and_text_that_is_no_pem_are_refused():
    old_bundle, old_key = tls.issue(SEATS_GATEWAY_NAME, days=1, start=datetime.datetime(
        2020, 1, 1, tzinfo=datetime.timezone.utc))
    said = problems({**seats_raw(), "gatewayTlsCertificate": old_bundle, "gatewayTlsKey": old_key})
    assert "valid 2020-01-01 to 2020-01-02; allowed: certificates valid now" in said
    said = problems({**seats_raw(), "gatewayTlsCertificate": "not a certificate", "gatewayTlsKey": "nor a key"})
    assert problem_line(said, "gatewayTlsCertificate").endswith(
        "got a secret that holds no PEM certificate; allowed: PEM certificates: the gateway's own"
        " first, then its chain up to and including the self-signed root its clients trust")


def test_tls_needs_both_secrets_and_the_secrets_need_tls():
    raw = seats_raw()
    del raw["gatewayTlsKey"]
    assert problem_line(problems(raw), "gatewayTlsKey").endswith(
        "got nothing; allowed: a secret (required with gateway.kubernetes.tls): pulumi config set"
        " --secret gatewayTlsKey < file")
    raw = seats_raw()
    del raw["gateway"]["kubernetes"]["tls"]
    del raw["vllmFleet"]["agentSandbox"]["seats"]
    said = problems(raw)
    assert problem_line(said, "gatewayTlsCertificate").endswith(
        "got a secret without the gateway's TLS; allowed: set only with gateway.kubernetes.tls or"
        " gateway.listen.tls")
    raw = seats_raw()
    raw["gateway"]["kubernetes"]["tls"]["name"] = "Gateway_Spear"
    assert "gateway.kubernetes.tls.name: got 'Gateway_Spear'; allowed: a DNS name in lower case" \
        in problems(raw)


def test_the_pods_serve_https_with_the_certificate_from_its_secret_and_probe_over_https():
    gateway = parse_stack(seats_raw()).gateway
    spec = cluster_manifests.deployment(gateway, {})["spec"]["template"]["spec"]
    [litellm] = spec["containers"]
    assert litellm["command"][-4:] == ["--ssl_certfile_path", "/tls/tls.crt",
                                       "--ssl_keyfile_path", "/tls/tls.key"]
    assert {"name": "tls", "mountPath": "/tls", "readOnly": True} in litellm["volumeMounts"]
    assert {"name": "tls", "secret": {"secretName": cluster_manifests.TLS_SECRET}} in spec["volumes"]
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert litellm[probe]["httpGet"]["scheme"] == "HTTPS", probe
    secret = cluster_manifests.tls_secret(gateway, "BUNDLE", "KEY")
    assert secret["type"] == "kubernetes.io/tls"
    assert secret["string_data"] == {"tls.crt": "BUNDLE", "tls.key": "KEY"}


def test_prometheus_scrapes_the_pods_over_https_checking_the_name_against_the_root():
    cfg = parse_stack(seats_raw())
    target = metrics_target(cfg.gateway)
    [_, job] = monitoring.scrape_configs(cfg.vllm_fleet, target)
    assert job["scheme"] == "https"
    assert job["tls_config"] == {"ca_file": f"{monitoring.KEY_DIR}/{monitoring.GATEWAY_CA}",
                                 "server_name": SEATS_GATEWAY_NAME}
    secret = monitoring.gateway_key_secret(cfg.vllm_fleet, "sk-master", target)
    assert secret["string_data"][monitoring.GATEWAY_CA] == cfg.gateway.kubernetes.tls.root_pem
    [_, monitor] = monitoring.monitors(cfg.vllm_fleet, target)
    [endpoint] = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["scheme"] == "https"
    assert endpoint["tlsConfig"]["serverName"] == SEATS_GATEWAY_NAME


def test_developers_wiring_names_the_gateway_by_its_tls_name_and_carries_its_root():
    program = run_program(seats_raw(), SEAT_SECRETS)
    codex = program.exported["harnesses:ana"]["codex"]
    assert program.secret["harnesses:ana"]
    assert f'base_url = "{SEATS_GATEWAY_URL}/v1"' in codex["file"]["content"]
    # scripts/harness-env --write puts the root where the variable says (tests/unit/test_harness_env.py).
    assert codex["env"]["CODEX_CA_CERTIFICATE"] == harness.DEVELOPER_CA_FILE
    assert codex["ca"] == {"path": harness.DEVELOPER_CA_FILE,
                           "content": root_certificate(SEATS_TLS_CERTIFICATE)}


def test_developers_outside_the_cluster_reach_it_by_name_at_its_node_port_and_seats_at_its_cluster_ip():
    raw = seats_raw()
    raw["gateway"]["kubernetes"]["nodePort"] = 30443
    gateway = parse_stack(raw).gateway
    spec = cluster_manifests.service(gateway)["spec"]
    assert (spec["type"], spec["clusterIP"]) == ("NodePort", gateway.kubernetes.service_ip)
    assert spec["ports"] == [{"name": "http", "port": 4000, "targetPort": "http", "nodePort": 30443}]
    program = run_program(raw, SEAT_SECRETS)
    # A developer's wiring: the name, at the node port, trusting the root.
    codex = program.exported["harnesses:ana"]["codex"]
    assert f'base_url = "https://{SEATS_GATEWAY_NAME}:30443/v1"' in codex["file"]["content"]
    assert codex["ca"]["content"] == root_certificate(SEATS_TLS_CERTIFICATE)
    # A seat's: the same name at the Service's port, which its host alias sends to the cluster IP.
    seat = json.dumps({name: inputs for name, inputs in program.inputs.items()
                       if name.startswith("seat-ana-codex")})
    assert f"{SEATS_GATEWAY_URL}/v1" in seat and ":30443" not in seat


def test_a_node_port_is_refused_without_tls_or_outside_the_node_port_range():
    raw = seats_raw()
    raw["gateway"]["kubernetes"]["nodePort"] = 8443
    assert "gateway.kubernetes.nodePort: got 8443; allowed: an integer 30000-32767" in problems(raw)
    raw = seats_raw()
    del raw["gateway"]["kubernetes"]["tls"]
    del raw["vllmFleet"]["agentSandbox"]["seats"]
    raw["gateway"]["kubernetes"]["nodePort"] = 30443
    assert problem_line(problems(raw), "gateway.kubernetes.nodePort").endswith(
        "got 30443; allowed: nothing without gateway.kubernetes.tls: a gateway reached from"
        " outside the cluster serves TLS by name")
