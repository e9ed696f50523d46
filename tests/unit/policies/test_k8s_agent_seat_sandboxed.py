import copy

import pytest
from pulumi_policy import StackValidationPolicy

from policies.gateway import RULES as GATEWAY_RULES
from policies.kubernetes import RULES as KUBERNETES_RULES
from policies.kubernetes.agent_seat_sandboxed import POLICY
from spear import tokens
from spear.seats import RUNTIME_CLASS
from tests.support.policy_harness import (UNKNOWN, check_resource, check_stack, kube_objects,
                                          kube_stack, prod_stack, seat_objects)

SEED = "seed 001 step 7 (sandbox what the agent executes: the minimum for one seat)"
HARNESSES = {"ana-codex": {"developer": "ana", "harness": "codex"},
             "bob-qwen": {"developer": "bob", "harness": "qwen-code"},
             "bob-claude": {"developer": "bob", "harness": "claude-code"},
             "ana-openhands": {"developer": "ana", "harness": "openhands"}}


def objects(**seats):
    return {**kube_objects(), **seat_objects(**seats)}


def seat_pod(found, name="seat-ana-codex"):
    return found[name][1]["spec"]["template"]["spec"]


def test_the_fleet_and_every_harness_seat_it_renders_pass():
    assert check_stack(POLICY, prod_stack(), kube_stack(objects(**HARNESSES))) == []


def test_a_seat_missing_an_item_is_a_violation_naming_the_workload_and_the_item():
    found = objects()
    seat_pod(found)["hostPID"] = True
    [message] = check_stack(POLICY, prod_stack(), kube_stack(found))
    assert message.startswith(f"{SEED}: Deployment 'seat-ana-codex' in the agent namespace: hostPID"
                              " is true: the seat shares the node's namespace. Fix: run harnesses"
                              " as the stack's seats (vllmFleet.agentSandbox.seats)")


def test_a_seat_with_the_docker_socket_and_its_key_as_a_literal_is_refused_for_each():
    found = objects()
    pod = seat_pod(found)
    pod["volumes"].append({"name": "docker", "hostPath": {"path": "/var/run/docker.sock"}})
    pod["containers"][0]["volumeMounts"].append({"name": "docker", "mountPath": "/var/run/docker.sock"})
    pod["containers"][0]["env"][2] = {"name": "OWNED_API_KEY", "value": "sk-ana-VIRTUAL"}
    messages = check_stack(POLICY, prod_stack(), kube_stack(found))
    assert [m.split(" in the agent namespace: ", 1)[1].split(":")[0] for m in messages] == [
        "volume 'docker' mounts a path of the node (hostPath)",
        "container 'harness'", "container 'harness'"]
    assert "mounts 'docker' at '/var/run/docker.sock' writable" in messages[1]
    assert "env OWNED_API_KEY holds a key as a literal value" in messages[2]


UNSANDBOXED = {"containers": [{"name": "agent", "image": "python:3.12"}]}
WORKLOADS = {
    tokens.K8S_POD: {"spec": UNSANDBOXED},
    tokens.K8S_STATEFUL_SET: {"spec": {"template": {"spec": UNSANDBOXED}}},
    tokens.K8S_DAEMON_SET: {"spec": {"template": {"spec": UNSANDBOXED}}},
    tokens.K8S_REPLICA_SET: {"spec": {"template": {"spec": UNSANDBOXED}}},
    tokens.K8S_JOB: {"spec": {"template": {"spec": UNSANDBOXED}}},
    tokens.K8S_CRON_JOB: {"spec": {"jobTemplate": {"spec": {"template": {"spec": UNSANDBOXED}}}}},
    tokens.K8S_DEPLOYMENT: {"spec": {"template": {"spec": UNSANDBOXED}}},
}


@pytest.mark.parametrize("kind", list(WORKLOADS), ids=lambda k: k.type.rsplit(":", 1)[-1])
def test_every_kind_of_workload_in_the_agent_namespace_is_judged(kind):
    props = {"metadata": {"name": "stray", "namespace": "agents"}, **copy.deepcopy(WORKLOADS[kind])}
    messages = check_stack(POLICY, prod_stack(), [*kube_stack(kube_objects()), (kind, props, "stray")])
    # The pod's token; the container's image, user, group, non-root, privilege escalation, root
    # filesystem, capabilities and seccomp profile.
    assert len(messages) == 9
    assert all(m.startswith(f"{SEED}: {kind.type.rsplit(':', 1)[-1]} 'stray' in the agent namespace")
               for m in messages)
    assert any("automountServiceAccountToken is not false" in m for m in messages)
    assert any("image 'python:3.12' has no @sha256 digest" in m for m in messages)


def test_a_workload_outside_the_agent_namespace_is_not_the_seats_rule():
    props = {"metadata": {"name": "tool", "namespace": "vllm"}, **copy.deepcopy(WORKLOADS[tokens.K8S_POD])}
    assert check_stack(POLICY, prod_stack(), [*kube_stack(objects()), (tokens.K8S_POD, props, "tool")]) == []


def test_a_namespace_not_labelled_as_the_sandbox_does_not_make_its_workloads_seats():
    found = objects()
    found["vllm-agents"][1]["metadata"]["labels"] = {}
    seat_pod(found)["hostNetwork"] = True
    assert check_stack(POLICY, prod_stack(), kube_stack(found)) == []


def test_a_workload_whose_namespace_is_unknown_cannot_pass_and_the_others_are_still_judged():
    found = objects(**HARNESSES)
    found["seat-ana-codex"][1]["metadata"]["namespace"] = UNKNOWN
    seat_pod(found, "seat-bob-qwen")["hostIPC"] = True
    messages = check_stack(POLICY, prod_stack(), kube_stack(found))
    assert len(messages) == 2
    assert "cannot be verified at preview" in messages[0]
    assert "Deployment 'seat-bob-qwen' in the agent namespace: hostIPC is true" in messages[1]


def test_an_unknown_value_in_a_seats_pod_cannot_pass():
    found = objects()
    seat_pod(found)["containers"][0]["image"] = UNKNOWN
    [message] = check_stack(POLICY, prod_stack(), kube_stack(found))
    assert "cannot be verified at preview" in message


def test_no_other_rule_of_the_pack_refuses_the_seats_objects():
    seats = seat_objects(**HARNESSES)
    for rule in (*KUBERNETES_RULES, *GATEWAY_RULES):
        if isinstance(rule.POLICY, StackValidationPolicy):
            assert check_stack(rule.POLICY, prod_stack(), kube_stack({**kube_objects(), **seats})) == []
        else:
            for name, (kind, props) in seats.items():
                assert check_resource(rule.POLICY, kind, props, secret_outputs=[]) == [], (rule, name)


def test_where_the_namespace_names_a_sandbox_runtime_a_seat_without_it_is_refused():
    found = objects()
    found["vllm-agents"][1]["metadata"]["labels"][RUNTIME_CLASS] = "gvisor"
    [message] = check_stack(POLICY, prod_stack(), kube_stack(found))
    assert message.startswith(f"{SEED}: Deployment 'seat-ana-codex' in the agent namespace:"
                              " runtimeClassName is None, not 'gvisor'")
    seat_pod(found)["runtimeClassName"] = "runc"
    [message] = check_stack(POLICY, prod_stack(), kube_stack(found))
    assert "runtimeClassName is 'runc', not 'gvisor'" in message
    seat_pod(found)["runtimeClassName"] = "gvisor"
    assert check_stack(POLICY, prod_stack(), kube_stack(found)) == []


def test_the_stacks_runtime_class_labels_the_namespace_and_runs_every_seat_and_check_with_it():
    from components.agent_seats import manifests as seat_manifests
    from components.vllm_fleet import manifests as fleet_manifests
    from config.schema import parse
    from tests.support.config_cases import seats_raw
    raw = seats_raw()
    raw["vllmFleet"]["agentSandbox"]["runtimeClass"] = "gvisor"
    cfg = parse(raw)
    sandbox = cfg.vllm_fleet.agent_sandbox
    assert fleet_manifests.sandbox_namespace(sandbox)["metadata"]["labels"][RUNTIME_CLASS] == "gvisor"
    trust = seat_manifests.GatewayTrust.of(cfg.gateway)
    [seat] = sandbox.seats.values()
    entry = seat_manifests.wiring(seat, "https://gateway", cfg.harnesses, None)
    deployment = seat_manifests.deployment(sandbox, seat, entry, trust)
    job = seat_manifests.dialect_check_job(sandbox, seat_manifests.dialect_check(sandbox, "codex"),
                                           entry, trust)
    for spec in (deployment["spec"]["template"]["spec"], job["spec"]["template"]["spec"]):
        assert spec["runtimeClassName"] == "gvisor"
