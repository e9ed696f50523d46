"""The vLLM fleet serving behind the gateway, on real parts: the session's local cluster (a real
node running the serving image's pods, tests/support/kube.py), a gateway host with LiteLLM and
its database, the real engine and the real pulumi-kubernetes provider. One lifecycle, in order
(each test starts from the state the previous one left):

up makes the fleet, proves each track from the gateway host and routes `coder` to it, with every
developer's smoke test answered by the fleet's pods; a second up changes nothing; the gateway
stamps each request's cache_salt (per team) and priority (per key) whatever the client sent; a
conversation's turns stay on one pod (prefix affinity) while the conversations spread over the
pods, and a removed pod's conversations move to the pods left; a
canary gets its own Service and only the pilot ring's requests, never anyone else's; a broken
canary (a chat template without tool calls) fails the up at its verification, naming the probe
and the reason; a promotion without a passing gate record is refused, and so is one that drops
`previous`, against what is deployed; destroy removes everything. The gate's run, the promotion
its record allows and scripts/rollback are the README's rollout flow, which
tests/integration/test_readme_commands.py runs on the local stack with the same checks.
"""

from __future__ import annotations

import base64
import json
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from localhosts import local_stack
from review.summary import summarize
from spear.harness import developer_key
from spear_gateway.tenancy import Tenant
from localhosts.engine import REPO, Project, engine_env, without_inference_hosts
from tests.support import fleet as fleet_reads, gate_records
from tests.support.config_cases import CANARY_PAIR, STABLE_PAIR
from tests.support.kube import clear
from tests.support.stack_files import local_inference_hosts

pytestmark = pytest.mark.kubernetes

STACK = "fleet"
GATEWAY_SSH, PROXY_PORT, DATABASE_PORT = 2294, 4044, 25434
GATEWAY = f"http://127.0.0.1:{PROXY_PORT}"
MASTER_KEY = "sk-spear-fleet-it-master-77c1"
FRONTIER_KEY = "sk-ant-fleet-it-frontier-3e2d"
API_KEY = "sk-fleet-integration-0123456789"
BACKUP_KEY = "fleet-it-backup-passphrase-0123456789ab"
NAMESPACE = "vllm-it"
AGENTS = "agents-it"
STABLE_IP, CANARY_IP = "10.96.100.20", "10.96.100.21"
STANDIN = "localhost/spear-fleet/vllm-standin"
# The serving image's model whose chat template has no tool calls: the parser trap.
TRAP_MODEL = "spear-fleet/tiny-no-tool-template"
DEVELOPERS = {"ana": {"team": "platform", "ring": "pilot"},
              "bob": {"team": "platform", "priority": "background"},
              "cyn": {"team": "research"},
              # The rollout gate's own keys (vllmFleet.rolloutGate.keys): stable's and the canary's.
              "gate": {"team": "ci", "ring": "stable"}, "gate-pilot": {"team": "ci", "ring": "pilot"}}


def local_rollout_gate() -> dict[str, Any]:
    """The local stack's rolloutGate as it stands (its policy and keys: what `scripts/gate --stack
    local` runs), its records going to the test's own folder."""
    local = yaml.safe_load((REPO / "stacks" / "Pulumi.local.yaml").read_text())["config"]
    return {**local["spear-fleet:vllmFleet"]["rolloutGate"], "records": gate_records.RECORDS}


def fleet_config(kubeconfig: Path, cache: Path) -> dict[str, Any]:
    return {
        "kubeconfig": str(kubeconfig),
        "namespace": NAMESPACE,
        "image": STANDIN,
        "servedModelName": "qwen3-coder-next",
        "stable": STABLE_PAIR,
        "replicas": 2,
        "tensorParallelSize": 2,
        "maxModelLen": 4096,
        "schedulingPriority": True,
        "serviceIPs": {"stable": STABLE_IP, "canary": CANARY_IP},
        # The gateway host (this machine's network) reaches the pods from the node's address on
        # their bridge.
        "ingressFrom": ["10.244.0.1/32"],
        "modelCache": {"size": "1Gi", "hostPath": str(cache), "accessMode": "ReadWriteOnce"},
        "agentSandbox": {"namespace": AGENTS,
                         "mirrors": {"pypi": {"cidr": "10.20.1.0/24", "ports": [443]}}},
        "rolloutGate": local_rollout_gate(),
    }


@pytest.fixture(scope="module")
def gateway_host():
    host = local_stack.start_gateway("it-fleet-gw", GATEWAY_SSH, fresh=True)
    yield host
    local_stack.stop("it-fleet-gw", discard=True)


@pytest.fixture(scope="module")
def fleet(kube_cluster, gateway_host, tmp_path_factory):
    """A stack of the fleet and the gateway routing `coder` to it alone (the config's required
    inference host is left out by the program)."""
    workdir = tmp_path_factory.mktemp("fleet")
    clear(kube_cluster.client(), [NAMESPACE, AGENTS], [f"{NAMESPACE}-vllm-model-cache"])
    project = without_inference_hosts(workdir, engine_env())
    key = workdir / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    hosts = local_inference_hosts()
    hosts["inferenceHosts"]["local"]["ssh"]["privateKeyPath"] = str(key)
    local = yaml.safe_load((REPO / "stacks" / "Pulumi.local.yaml").read_text())["config"]
    gateway = local["spear-fleet:gateway"]
    gateway["ssh"].update(port=GATEWAY_SSH, privateKeyPath=str(gateway_host.private_key_path))
    gateway["listen"]["port"] = PROXY_PORT
    # No seats here, so none of the local stack's HTTPS listener (whose address:port it holds).
    del gateway["listen"]["tls"]
    gateway["database"]["port"] = DATABASE_PORT
    gateway["coder"]["upstreams"] = ["vllmFleet"]
    project.new_stack(STACK, {
        **hosts,
        "gateway": gateway,
        "developers": {name: {**extra, "maxBudget": 25, "budgetDuration": "30d"}
                       for name, extra in DEVELOPERS.items()},
        "vllmFleet": fleet_config(kube_cluster.kubeconfig, workdir / "model-cache"),
    })
    for key, value in (("gatewayMasterKey", MASTER_KEY), ("frontierApiKey", FRONTIER_KEY),
                       ("vllmApiKey", API_KEY), ("gatewayBackupKey", BACKUP_KEY)):
        project.pulumi("config", "set", "--secret", "--stack", STACK, f"spear-fleet:{key}", value)
    yield project, kube_cluster.client()
    project.destroy(STACK)


def set_pair(project: Project, key: str, pair: dict[str, str] | None) -> None:
    """Declare (or, with None, drop) vllmFleet.<key>."""
    project.set_object(STACK, f"vllmFleet.{key}", pair)


def pod_names(client, track: str) -> set[str]:
    items = client.get(f"/api/v1/namespaces/{NAMESPACE}/pods?labelSelector=app%3Dvllm%2Ctrack%3D{track}")["items"]
    return {p["metadata"]["name"] for p in items if p["status"]["phase"] == "Running"}


def keys(project: Project) -> dict[str, str]:
    harnesses = project.outputs(STACK)["harnesses"]
    return {dev: developer_key(harnesses[dev]) for dev in DEVELOPERS}


def pod_requests(address: str) -> list[dict[str, Any]]:
    """What the serving image's pods behind a Service recorded (stand-in only: /standin/requests),
    from this machine through kube-proxy, as many pods as answer in a few tries."""
    seen: dict[tuple, dict] = {}
    for _ in range(12):
        request = urllib.request.Request(f"http://{address}:8000/standin/requests",
                                         headers={"Authorization": f"Bearer {API_KEY}"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            for record in json.loads(answer.read()):
                seen[tuple(sorted((k, json.dumps(v)) for k, v in record.items()))] = record
    return list(seen.values())


def test_up_makes_the_fleet_and_routes_coder_to_it_proven_from_the_gateway_host(fleet):
    project, client = fleet
    up = project.up(STACK)
    assert up.ok, up.output[-8000:]
    assert fleet_reads.available(client, NAMESPACE, "stable", 2)
    assert fleet_reads.serving(client, NAMESPACE, "stable") == (
        f"{STANDIN}:v0.24.0", "Qwen/Qwen3-Coder-Next-FP8", STABLE_PAIR["revision"])
    # The key: in the Secret the pods read, a Pulumi secret in state, never in plain text there.
    secret = client.get(f"/api/v1/namespaces/{NAMESPACE}/secrets/vllm-api-key")
    assert base64.b64decode(secret["data"]["VLLM_API_KEY"]).decode() == API_KEY
    assert API_KEY not in project.state_text(STACK)
    outputs = project.outputs(STACK)
    gateway = outputs["gateway"]
    assert gateway["fleet_routes"]["stable"]["verified"] == ["model-list", "completion", "tool-call"]
    assert gateway["smoke_tests"] == {dev: "end_turn | SPEAR-BACKEND-OK | ()" for dev in DEVELOPERS}
    stable_pods = pod_names(client, "stable")
    for dev in DEVELOPERS:
        [served] = gateway["served_by"][dev]
        route, pod = served.removesuffix(")").split(" (")
        assert route == "vllm-stable" and pod in stable_pods
    assert outputs["vllm_fleet"]["cluster_ips"] == {"stable": STABLE_IP}
    # The track's throughput, measured on its pods from the gateway host: the first, so no last.
    measured = gateway["fleet_routes"]["stable"]["throughput"]
    assert measured["prefill_tokens_per_second"] > 0 and measured["decode_tokens_per_second"] > 0
    assert (measured["previous"], measured["ratios"]) == (None, None)


def test_a_second_up_changes_nothing(fleet):
    project, _ = fleet
    again = project.up(STACK)
    assert again.ok, again.output[-4000:]
    assert set(again.changes()) == {"same"}


def test_the_gateway_stamps_each_requests_cache_salt_and_priority_whatever_the_client_sent(fleet):
    project, _ = fleet
    key = keys(project)
    assert fleet_reads.ask(GATEWAY, key["bob"], cache_salt="someone-elses-salt", priority=0)[0] == 200
    assert fleet_reads.ask(GATEWAY, key["cyn"], priority=20)[0] == 200
    records = pod_requests(STABLE_IP)
    salt = {dev: Tenant(key="", developer=dev, team=DEVELOPERS[dev]["team"]).cache_salt("team")
            for dev in DEVELOPERS}
    assert salt["ana"] == salt["bob"] != salt["cyn"]
    stamped = {(r["cache_salt"], r["priority"]) for r in records}
    # bob is background (10, even asking 0); cyn may lower her own priority (20), never raise it.
    assert (salt["bob"], 10) in stamped and (salt["cyn"], 20) in stamped
    assert "someone-elses-salt" not in {r["cache_salt"] for r in records}
    # Every request that came through the gateway carries a tenant's salt (the track's proofs
    # ask the pods directly from the gateway host, and carry none).
    assert {r["cache_salt"] for r in records} <= {*salt.values(), None}


def turn(key: str, messages: list[dict[str, str]]) -> str:
    """One turn of a conversation through the gateway: the pod that answered it."""
    status, headers, answer = fleet_reads.ask(GATEWAY, key, messages=messages)
    assert status == 200, answer
    return headers["llm_provider-x-spear-standin-pod"]


def conversation(first_ask: str, turns: int) -> list[list[dict[str, str]]]:
    """Each turn's messages: the system prompt, the first ask, and every exchange since."""
    messages = [{"role": "system", "content": "You are a coding agent in a repository."},
                {"role": "user", "content": first_ask}]
    out = []
    for i in range(turns):
        out.append(list(messages))
        messages += [{"role": "assistant", "content": "SPEAR-BACKEND-OK"},
                     {"role": "user", "content": f"Now step {i + 2}."}]
    return out


def ready_pods(client) -> set[str]:
    slices = client.get(f"/apis/discovery.k8s.io/v1/namespaces/{NAMESPACE}/endpointslices"
                        "?labelSelector=kubernetes.io%2Fservice-name%3Dvllm")["items"]
    return {e["targetRef"]["name"] for s in slices for e in s.get("endpoints") or []
            if (e.get("conditions") or {}).get("ready")}


def test_a_conversations_turns_stay_on_one_pod_sessions_spread_and_a_removed_pods_move(fleet):
    project, client = fleet
    key = keys(project)
    pods = pod_names(client, "stable")
    assert len(pods) == 2
    # Eight conversations each of two tenants (platform's ana, research's cyn), three turns each.
    sessions = {(dev, i): conversation(f"Task {i} of {dev}: fix the parser.", 3)
                for dev in ("ana", "cyn") for i in range(8)}
    landed = {session: [turn(key[session[0]], messages) for messages in turns]
              for session, turns in sessions.items()}
    # Every turn of a conversation on its first turn's pod (its prefix is cached there)...
    assert all(len(set(on)) == 1 for on in landed.values()), landed
    # ... and the conversations spread over both pods, for each tenant.
    for dev in ("ana", "cyn"):
        assert {on[0] for (d, _), on in landed.items() if d == dev} == pods, landed
    # A pod that leaves: its conversations' next turns go to a pod that is there, and stay there.
    gone = landed[("ana", 0)][0]
    moved = [s for s, on in landed.items() if on[0] == gone]
    assert client.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/{gone}")[0] == 200
    deadline = time.monotonic() + 60
    while gone in ready_pods(client) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert gone not in ready_pods(client)
    time.sleep(3)  # the gateway lists the pods every second
    for session in moved:
        follow = conversation(sessions[session][0][1]["content"], 5)[3:]
        now = [turn(key[session[0]], messages) for messages in follow]
        assert gone not in now and len(set(now)) == 1, (session, now)


def test_a_canary_gets_its_own_service_and_only_the_pilot_rings_requests(fleet):
    project, client = fleet
    set_pair(project, "canary", CANARY_PAIR)
    project.set_config(STACK, "vllmFleet.canary.replicas", 1)
    text = summarize(project.preview(STACK), None)
    assert "canary" in text
    up = project.up(STACK)
    assert up.ok, up.output[-8000:]
    assert up.ops()["vllm-canary"] == "create" and up.ops().get("vllm-stable", "same") == "same"
    assert fleet_reads.available(client, NAMESPACE, "canary", 1)
    assert client.get(f"/api/v1/namespaces/{NAMESPACE}/services/vllm-canary")["spec"]["clusterIP"] == CANARY_IP
    canary_pods, stable_pods = pod_names(client, "canary"), pod_names(client, "stable")
    key = keys(project)
    assert {(route, pod in canary_pods)
            for route, pod in fleet_reads.served_by(GATEWAY, key["ana"], 8)} == {("vllm-canary", True)}
    for dev in ("bob", "cyn"):
        assert {(route, pod in stable_pods)
                for route, pod in fleet_reads.served_by(GATEWAY, key[dev], 8)} == {("vllm-stable", True)}
    # Nobody outside the pilot ring ever reached a canary pod (None: its proofs, from the
    # gateway host; the gate's pilot key's smoke test is its team's salt).
    assert {r["cache_salt"] for r in pod_requests(CANARY_IP)} == {
        Tenant(key="", developer="ana", team="platform").cache_salt("team"),
        Tenant(key="", developer="gate-pilot", team="ci").cache_salt("team"), None}


def test_a_broken_canary_fails_the_up_at_its_verification_naming_the_probe_and_the_reason(fleet):
    project, client = fleet
    set_pair(project, "canary", {**CANARY_PAIR, "model": TRAP_MODEL})
    failed = project.up(STACK)
    assert not failed.ok
    assert "endpoint vllm-canary: tool-call probe failed: parser-not-configured" in failed.output, failed.output[-5000:]
    # Put back: the canary serves the model with its tool-call template again.
    set_pair(project, "canary", CANARY_PAIR)
    fixed = project.up(STACK)
    assert fixed.ok, fixed.output[-8000:]
    assert fleet_reads.serving(client, NAMESPACE, "canary")[1] == CANARY_PAIR["model"]


def test_a_promotion_without_a_passing_record_is_refused_before_anything_changes(fleet):
    project, client = fleet
    set_pair(project, "previous", STABLE_PAIR)
    set_pair(project, "stable", CANARY_PAIR)
    refused = project.up(STACK)
    assert not refused.ok
    assert "no gate record pins exactly v0.25.0" in refused.output
    assert fleet_reads.serving(client, NAMESPACE, "stable")[0] == f"{STANDIN}:v0.24.0"


def test_deleting_previous_while_changing_stable_is_refused_against_what_is_deployed(fleet):
    project, client = fleet
    set_pair(project, "previous", None)  # stable is still the canary's pair, and no record
    refused = project.up(STACK)
    assert not refused.ok
    assert "stable moves off the deployed pair v0.24.0 @ Qwen/Qwen3-Coder-Next-FP8 revision" \
           " da6e2ed, so previous must be that pair (declared: none)" in refused.output
    assert fleet_reads.serving(client, NAMESPACE, "stable")[0] == f"{STANDIN}:v0.24.0"
    set_pair(project, "previous", STABLE_PAIR)


def test_destroy_removes_everything(fleet):
    project, client = fleet
    gone = project.destroy(STACK)
    assert gone.ok, gone.output[-4000:]
    assert set(gone.changes()) == {"delete"}
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and (client.get(f"/api/v1/namespaces/{NAMESPACE}")
                                           or client.get(f"/api/v1/namespaces/{AGENTS}")):
        time.sleep(1)
    assert client.get(f"/api/v1/namespaces/{NAMESPACE}") is None
    assert client.get(f"/api/v1/namespaces/{AGENTS}") is None
