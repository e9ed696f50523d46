"""The node guard (components/agent_seats/node_guard.py): the table it writes from the seats on its
node, which it vouches for on each pod, and the objects that run it. The table is checked by the
real nft (`nft -c`, which parses and validates without applying); the in-cluster test
(tests/integration/test_gateway_in_cluster.py) shows it holding on a real node."""

from __future__ import annotations

import json
import subprocess

import pytest

from components.agent_seats import manifests, node_guard
from config.load import parse_stack
from spear import seats
from tests.support.config_cases import NODE_GUARD_IMAGE, SEATS_GATEWAY_IP, seats_raw

ALLOW = [{"cidr": "10.96.100.50/32", "ports": [4000]}, {"cidr": "10.20.1.0/24", "ports": [443, 80]}]


def pod(name: str, *ips: str, host_network: bool = False, annotation: str | None = None,
        phase: str = "Running") -> dict:
    return {"metadata": {"name": name, "annotations": {} if annotation is None else {
                seats.NODE_GUARD: annotation}},
            "spec": {"hostNetwork": host_network},
            "status": {"phase": phase, "podIPs": [{"ip": ip} for ip in ips]}}


def test_the_seats_are_the_pods_own_addresses_never_the_nodes_nor_a_finished_pods():
    pods = {"items": [pod("a", "10.244.0.5"), pod("b", "10.244.0.6", "fd00::6"),
                      pod("starting", "10.244.0.7", phase="Pending"), pod("pending", phase="Pending"),
                      pod("host", "192.0.2.2", host_network=True),
                      # A dialect check's Job pod keeps its address in the API once done.
                      pod("done", "10.244.0.8", phase="Succeeded"),
                      pod("failed", "10.244.0.9", phase="Failed")]}
    assert node_guard.seat_addresses(pods) == {"10.244.0.5", "10.244.0.6", "fd00::6", "10.244.0.7"}


def test_the_table_sends_each_seats_packets_to_the_gateway_and_mirrors_and_rejects_the_rest():
    text = node_guard.ruleset({"10.244.0.5", "fd00::6"}, ALLOW)
    assert "set seats4 { type ipv4_addr; elements = { 10.244.0.5 }; }" in text
    assert "set seats6 { type ipv6_addr; elements = { fd00::6 }; }" in text
    # Judged by where it was sent: the gateway's Service IP, before kube-proxy's DNAT.
    assert ("ct original ip daddr 10.96.100.50/32 meta l4proto tcp ct original proto-dst { 4000 }"
            " accept") in text
    assert "ct original ip daddr 10.20.1.0/24 meta l4proto tcp ct original proto-dst { 443, 80 } accept" in text
    seat_chain = text[text.index("chain seat"):text.index("chain input")]
    assert seat_chain.strip().splitlines()[-2].strip() == "reject with icmpx type admin-prohibited"
    for hook in ("input", "forward"):  # to the node itself, and through it
        assert f"type filter hook {hook} priority -10; policy accept;" in text
    assert text.count("ip saddr @seats4 jump seat") == 2


@pytest.mark.parametrize("addresses", [set(), {"10.244.0.5", "10.244.0.9"}, {"10.244.0.5", "fd00::6"}])
def test_nft_takes_the_table_as_one_transaction(addresses):
    done = subprocess.run(["nft", "-c", "-f", "-"], input=node_guard.ruleset(addresses, ALLOW),
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_pod_is_vouched_for_once_the_table_holds_all_its_addresses():
    pods = {"items": [pod("new", "10.244.0.5"), pod("done", "10.244.0.6", annotation="10.244.0.6"),
                      pod("moved", "10.244.0.7", annotation="10.244.0.3"),
                      pod("not-yet", "10.244.0.8"), pod("pending")]}
    guarded = {"10.244.0.5", "10.244.0.6", "10.244.0.7"}
    assert node_guard.vouched(pods, guarded) == [("new", "10.244.0.5"), ("moved", "10.244.0.7")]


def guard_objects():
    config = parse_stack(seats_raw())
    sandbox = config.vllm_fleet.agent_sandbox
    return sandbox, dict(manifests.guard_objects(sandbox, manifests.GatewayTrust.of(config.gateway)))


def test_the_guard_runs_on_every_node_as_root_with_net_admin_alone_in_a_namespace_of_its_own():
    sandbox, objects = guard_objects()
    assert objects["Namespace"]["metadata"]["name"] == f"{sandbox.namespace}-node-guard"
    spec = objects["DaemonSet"]["spec"]["template"]["spec"]
    assert spec["hostNetwork"] and spec["tolerations"] == [{"operator": "Exists"}]
    [container] = spec["containers"]
    assert container["image"] == NODE_GUARD_IMAGE
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["NET_ADMIN"]}
    # Ready only once its table is on the node: seats wait for the DaemonSet.
    assert container["readinessProbe"]["exec"]["command"][-1] == node_guard.TABLE
    # Its right: list and annotate the pods of the seats' namespace, nothing else.
    assert objects["Role"]["metadata"]["namespace"] == sandbox.namespace
    assert objects["Role"]["rules"] == [{"apiGroups": [""], "resources": ["pods"],
                                         "verbs": ["list", "patch"]}]


def test_the_guard_allows_the_gateway_where_a_seat_resolves_it_and_each_mirror():
    sandbox, objects = guard_objects()
    config = json.loads(objects["ConfigMap"]["data"][manifests.GUARD_CONFIG])
    assert config["namespace"] == sandbox.namespace
    # The gateway's Service IP, which its TLS name resolves to in a seat, on the gateway's port.
    assert config["allow"][0] == {"cidr": f"{SEATS_GATEWAY_IP}/32", "ports": [4000]}
    assert [a["cidr"] for a in config["allow"][1:]] == [m.cidr for m in sandbox.mirrors]
    assert objects["ConfigMap"]["data"][manifests.GUARD_PROGRAM].startswith('"""The node guard')


def test_a_change_of_the_guards_settings_restarts_its_pods():
    _, objects = guard_objects()
    raw = seats_raw()
    raw["vllmFleet"]["agentSandbox"]["mirrors"]["npm"] = {"cidr": "10.20.9.0/24", "ports": [443]}
    config = parse_stack(raw)
    moved = dict(manifests.guard_objects(config.vllm_fleet.agent_sandbox,
                                         manifests.GatewayTrust.of(config.gateway)))
    def digest(objs):
        return objs["DaemonSet"]["spec"]["template"]["metadata"]["annotations"][manifests.GUARD_CONFIG_SHA256]
    assert digest(objects) != digest(moved)


def test_the_program_in_the_pod_names_its_table_and_annotation_as_the_stack_does():
    # node_guard.py runs alone in the pod, so it spells them itself.
    assert (node_guard.TABLE, node_guard.ANNOTATION) == (seats.NODE_GUARD_TABLE, seats.NODE_GUARD)


class FakeApi:
    """The API server as the guard asks it: the seats on its node, one answer per call."""

    def __init__(self, *answers: dict) -> None:
        self.answers = list(answers)

    def pods(self, namespace: str, node: str) -> dict:
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


@pytest.fixture
def nft_calls(monkeypatch):
    calls = []
    monkeypatch.setattr(node_guard.subprocess, "run", lambda args, **_: calls.append(args))
    monkeypatch.setattr(node_guard.time, "sleep", lambda _: None)
    return calls


def test_a_stopped_guard_removes_its_table_once_the_nodes_seats_are_gone(nft_calls):
    seat = {"items": [pod("seat", "10.244.0.5")]}
    node_guard.leave(FakeApi(seat, seat, {"items": [pod("done", "10.244.0.5", phase="Succeeded")]}),
                     "agents", "node")
    assert nft_calls == [["nft", "delete", "table", "inet", node_guard.TABLE]]


def test_a_guard_replaced_while_seats_run_leaves_their_table(nft_calls, monkeypatch):
    clock = iter(range(0, 1000, 5))
    monkeypatch.setattr(node_guard.time, "monotonic", lambda: next(clock))
    node_guard.leave(FakeApi({"items": [pod("seat", "10.244.0.5")]}), "agents", "node")
    assert nft_calls == []
