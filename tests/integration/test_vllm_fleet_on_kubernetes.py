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
and the reason; a promotion without a passing gate record is refused, with one the canary's pair
rolls out as stable; scripts/rollback brings the previous pair back in one command; destroy
removes everything.
"""

from __future__ import annotations

import base64
import json
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from localhosts import local_stack
from spear import receipts, rollout_gate, throughput, vllm
from review.summary import summarize
from spear_gateway.tenancy import Tenant
from localhosts.engine import REPO, Project, engine_env, without_inference_hosts
from tests.support import gate_records
from tests.support.config_cases import CANARY_PAIR, NEXT_REVISION, STABLE_PAIR
from tests.support.kube import clear
from tests.support.stack_files import local_inference_hosts

pytestmark = pytest.mark.kubernetes

STACK = "fleet"
GATEWAY_SSH, PROXY_PORT, DATABASE_PORT = 2294, 4044, 25434
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


def deployment(client, track: str) -> dict | None:
    return client.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/vllm-{track}")


def serving(client, track: str) -> tuple[str, str, str]:
    """(image, model, --revision) of a track's Deployment, as the cluster has it."""
    [container] = deployment(client, track)["spec"]["template"]["spec"]["containers"]
    return container["image"], container["command"][2], vllm.flags(container["command"])["--revision"]


def available(client, track: str, replicas: int) -> bool:
    status = deployment(client, track)["status"]
    conditions = {c["type"]: c["status"] for c in status.get("conditions") or ()}
    return (conditions.get("Available") == "True" and status.get("availableReplicas") == replicas
            and status.get("updatedReplicas") == replicas and status.get("replicas") == replicas)


def pod_names(client, track: str) -> set[str]:
    items = client.get(f"/api/v1/namespaces/{NAMESPACE}/pods?labelSelector=app%3Dvllm%2Ctrack%3D{track}")["items"]
    return {p["metadata"]["name"] for p in items if p["status"]["phase"] == "Running"}


def keys(project: Project) -> dict[str, str]:
    harnesses = project.outputs(STACK)["harnesses"]
    return {dev: harnesses[dev]["qwen-code"]["env"]["OPENAI_API_KEY"] for dev in DEVELOPERS}


def ask(key: str, messages: list[dict[str, str]] | None = None,
        **extra: Any) -> tuple[int, dict[str, str], dict[str, Any]]:
    """One `coder` chat completion through the gateway (by default the smoke test's ask):
    (status, headers, answer)."""
    body = {"model": "coder", "max_tokens": 32, **extra, "messages": messages or [
        {"role": "user", "content": "Reply with exactly: SPEAR-BACKEND-OK"}]}
    request = urllib.request.Request(f"http://127.0.0.1:{PROXY_PORT}/v1/chat/completions",
                                     data=json.dumps(body).encode(), headers={
                                         "Content-Type": "application/json", "Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(request, timeout=300) as answer:
            return answer.status, {k.lower(): v for k, v in answer.getheaders()}, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, {}, json.loads(error.read() or b"{}")


def served_by(key: str, times: int, **extra: Any) -> list[tuple[str, str]]:
    """(route, pod) of each of `times` requests; every one must be answered."""
    seen = []
    for _ in range(times):
        status, headers, answer = ask(key, **extra)
        assert status == 200, answer
        seen.append((headers.get("x-litellm-model-id"), headers.get("llm_provider-x-spear-standin-pod")))
    return seen


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
    assert available(client, "stable", 2)
    assert serving(client, "stable") == (f"{STANDIN}:v0.24.0", "Qwen/Qwen3-Coder-Next-FP8", STABLE_PAIR["revision"])
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
    assert ask(key["bob"], cache_salt="someone-elses-salt", priority=0)[0] == 200
    assert ask(key["cyn"], priority=20)[0] == 200
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
    status, headers, answer = ask(key, messages=messages)
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
    assert available(client, "canary", 1)
    assert client.get(f"/api/v1/namespaces/{NAMESPACE}/services/vllm-canary")["spec"]["clusterIP"] == CANARY_IP
    canary_pods, stable_pods = pod_names(client, "canary"), pod_names(client, "stable")
    key = keys(project)
    assert {(route, pod in canary_pods) for route, pod in served_by(key["ana"], 8)} == {("vllm-canary", True)}
    for dev in ("bob", "cyn"):
        assert {(route, pod in stable_pods) for route, pod in served_by(key[dev], 8)} == {("vllm-stable", True)}
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
    assert serving(client, "canary")[1] == CANARY_PAIR["model"]


def test_a_promotion_without_a_passing_record_is_refused_before_anything_changes(fleet):
    project, client = fleet
    set_pair(project, "previous", STABLE_PAIR)
    set_pair(project, "stable", CANARY_PAIR)
    refused = project.up(STACK)
    assert not refused.ok
    assert "no gate record pins exactly v0.25.0" in refused.output
    assert serving(client, "stable")[0] == f"{STANDIN}:v0.24.0"


def test_deleting_previous_while_changing_stable_is_refused_against_what_is_deployed(fleet):
    project, client = fleet
    set_pair(project, "previous", None)  # stable is still the canary's pair, and no record
    refused = project.up(STACK)
    assert not refused.ok
    assert "stable moves off the deployed pair v0.24.0 @ Qwen/Qwen3-Coder-Next-FP8 revision" \
           " da6e2ed, so previous must be that pair (declared: none)" in refused.output
    assert serving(client, "stable")[0] == f"{STANDIN}:v0.24.0"
    set_pair(project, "previous", STABLE_PAIR)


def test_scripts_gate_measures_the_canary_through_the_gateway_and_writes_its_record(fleet):
    project, _ = fleet
    env = {**project.env, "SPEAR_PROJECT_DIR": str(project.dir)}
    done = subprocess.run([str(REPO / "scripts" / "gate"), "--stack", STACK, "--name", "canary-1"],
                          env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "gate canary-1: v0.25.0 @ Qwen/Qwen3-Coder-Next-FP8 revision 1234567" in done.stdout
    assert "verdict: PASS" in done.stdout
    record = json.loads((project.dir / gate_records.RECORDS / "canary-1.json").read_text())
    paired = record["results"]["pairedEval"]
    assert (paired["tasks"], paired["b"], paired["c"]) == (14, 0, 0)  # the same model: neutral
    assert record["results"]["toolCalls"]["passed"] == 100
    assert record["pin"]["gatewayVersion"] == project.outputs(STACK)["gateway"]["litellm_version"]
    evidence = (project.dir / gate_records.RECORDS / "canary-1.evidence.jsonl").read_text()
    run = json.loads(evidence.splitlines()[0])
    assert (run["stable"], run["candidate"]) == ("coder as gate", "coder as gate-pilot")
    assert all(key not in evidence for key in keys(project).values())  # names, never keys
    # The gateway signed which track answered each side and what the pod that answered runs,
    # read off the pods: the canary's pair; stable's is the stable pair ("" for the requests
    # sent before the gateway's first listing of the canary's pods, which the Service placed).
    signed = {(line.get("track", "candidate"), line["receipt"]["track"], line["receipt"]["serves"])
              for line in map(json.loads, evidence.splitlines()[1:])}
    pairs = {side: receipts.serving(pair["tag"], pair["model"], pair["revision"])
             for side, pair in (("stable", STABLE_PAIR), ("candidate", CANARY_PAIR))}
    tracks = {"stable": "stable", "candidate": "canary"}
    assert {(side, tracks[side], pair) for side, pair in pairs.items()} <= signed <= {
        (side, tracks[side], serves) for side, pair in pairs.items() for serves in (pair, "")}
    # The streams' closing receipts: the gateway's TTFT beside the client's, never above it.
    latency = record["results"]["latency"]
    assert 0 < latency["gatewayTtftP95"] <= latency["ttftP95"] + rollout_gate.CLOCK_SLACK_SECONDS
    # The record moved to another pair, its evidence's run line with it: the receipts refuse it.
    lines = [json.loads(line) for line in evidence.splitlines()]
    lines[0]["pin"]["engineVersion"] = "v0.25.1"
    moved = rollout_gate.evidence_bytes(lines)
    assert rollout_gate.receipt_problems(evidence.encode(), gate_records.tasks(),
                                         receipts.receipt_key(MASTER_KEY),
                                         rollout_gate.pin_from_json(record["pin"])) == []
    pin = rollout_gate.pin_from_json(lines[0]["pin"])
    problems = rollout_gate.receipt_problems(moved, gate_records.tasks(),
                                             receipts.receipt_key(MASTER_KEY), pin)
    assert [p for p in problems if p.startswith("pin: the record pins v0.25.1")], problems


def test_a_promotion_with_a_passing_record_rolls_the_canarys_pair_out_as_stable(fleet):
    project, client = fleet
    set_pair(project, "canary", None)
    before = project.outputs(STACK)["gateway"]["fleet_routes"]["stable"]["throughput"]
    up = project.up(STACK)
    assert up.ok, up.output[-8000:]
    assert up.ops()["vllm-stable"] == "update" and up.ops()["vllm-canary"] == "delete"
    assert serving(client, "stable") == (f"{STANDIN}:v0.25.0", CANARY_PAIR["model"], NEXT_REVISION)
    assert available(client, "stable", 2) and deployment(client, "canary") is None
    # Everyone is back on stable, the pilot ring included, and it was verified again.
    assert {route for route, _ in served_by(keys(project)["ana"], 4)} == {"vllm-stable"}
    # The engine changed: the track's throughput was measured again and set beside the last.
    after = project.outputs(STACK)["gateway"]["fleet_routes"]["stable"]["throughput"]
    assert after["previous"] == {rate: before[rate] for rate in throughput.RATES}
    assert after["ratios"] == throughput.compared(after, before)


def test_scripts_rollback_brings_the_previous_pair_back_with_one_command(fleet):
    project, client = fleet
    env = {**project.env, "SPEAR_PROJECT_DIR": str(project.dir)}
    done = subprocess.run([str(REPO / "scripts" / "rollback"), "--stack", STACK, "--yes"],
                          env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert serving(client, "stable") == (f"{STANDIN}:v0.24.0", STABLE_PAIR["model"], STABLE_PAIR["revision"])
    assert available(client, "stable", 2)
    assert {route for route, _ in served_by(keys(project)["cyn"], 2)} == {"vllm-stable"}


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
