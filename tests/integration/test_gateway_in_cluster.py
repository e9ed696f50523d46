"""The gateway in the fleet's cluster (gateway.kubernetes), on real parts: the session's local
cluster (a real node), the gateway image (localhost/spear-fleet/litellm-gateway: LiteLLM 1.91.1
with Prisma's WebAssembly engine), one PostgreSQL on this machine that both replicas share, the
fleet's serving image behind its Service, the real engine and pulumi-kubernetes. In order:

up runs migrate.sh as a Job, then two replicas that each proved the fleet's route before serving,
makes every developer's key through the API server's proxy and answers each one's smoke test from
the fleet's pod; a second up changes nothing; each replica serves with the keys of the shared
database; each seated harness passed its dialect check (a Job: one real turn on the CI developer's
key) before its seats started; a bump of its version previews as the check's replacement, and
an `up` of a bump the seat image does not hold fails at the check with the seat unmoved;
an agent seat per harness (the seat image holds all four: localhosts/images/seat_image.py) runs sandboxed
(user 1000, read-only root, no token, no capability, the key only in its environment) and its real
harness completes a turn (a tool call, its result, an answer) through the gateway, by its TLS name
(which the seat resolves to the Service's address) over HTTPS, to the fleet, with the seat
developer's key; from inside each seat, the gateway and a declared mirror answer and nothing else
does (the mirror's other port, the frontier provider's stand-in, a fleet pod, the API server: the
local cluster enforces NetworkPolicy); a canary whose proof fails (the parser trap) stops the up at the first new pod, naming
the probe, while the pods before it serve on; a key's budget holds across the replicas (requests alternating between them stop
exactly where one ledger says the budget is spent, and a burst over both never overspends);
destroy removes it all.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import shlex
import socket
import ssl
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import yaml

from components.gateway.backup import CIPHER
from components.hostops.waiting import wait_until
from localhosts.images import gateway_image, harness_install, node_guard_image, seat_image
from localhosts.kube import kubebuild, kubenode
from localhosts.standins import frontier_standin, tiny_model
from components.agent_seats import manifests, node_guard
from spear import seats
from spear.harness import DEFAULT_VERSIONS, HARNESSES, ONE_TURN, OPENHANDS, QWEN_CODE, developer_key
from spear.rules import GATEWAY_POD_LABELS, pods_peer
from spear_gateway.pricing import Prices, worst_case_usd
from localhosts.engine import REPO, Project, engine_env, without_inference_hosts
from localhosts.servers.postgres import postgres_database
from tests.support.config_cases import CANARY_PAIR, STABLE_PAIR
from tests.support import tls
from tests.support.kube import clear
from tests.support.stack_files import local_inference_hosts

pytestmark = pytest.mark.kubernetes

STACK = "incluster"
MASTER_KEY = "sk-spear-incluster-master-5b1e"
FRONTIER_KEY = "sk-ant-incluster-frontier-90af"
API_KEY = "sk-incluster-vllm-0123456789"
FLEET_NS, GATEWAY_NS = "vllm-gw-it", "gateway-it"
STABLE_IP, CANARY_IP, GATEWAY_IP = "10.96.100.40", "10.96.100.41", "10.96.100.42"
# The gateway serves HTTPS under this name (gateway.kubernetes.tls), with a certificate made here.
TLS_NAME = "gateway.spear.test"
TLS_CERTIFICATE, TLS_KEY = tls.issue(TLS_NAME)
# The serving image's model whose chat template has no tool calls: the parser trap.
TRAP_MODEL = "spear-fleet/tiny-no-tool-template"
REPLICAS = 2
PORT = 4000
NODE_PORT = 30443  # where developers outside the cluster reach it (gateway.kubernetes.nodePort)
SEAT_DEVELOPER = "sam"
CHECK_DEVELOPER = "ci"  # whose key the harnesses' dialect checks ask with
BUDGET = 10.0  # USD, for the two keys the budget tests spend
# The budget tests' request, priced so that output is what costs: its worst case, 64 tokens at
# $0.10, is 6.40 of the budget, and the fleet's answer of a few tokens a fraction of that, so
# one request fits at a time and a few fit one after another.
BODY = {"model": "coder", "max_tokens": 64,
        "messages": [{"role": "user", "content": "Reply with exactly: SPEAR-BACKEND-OK"}]}
INPUT_USD_PER_MILLION, OUTPUT_USD_PER_MILLION = 0.001, 100_000.0
PRICES = Prices(INPUT_USD_PER_MILLION / 1e6, OUTPUT_USD_PER_MILLION / 1e6)
DEVELOPERS = {"ana": {"team": "platform", "maxBudget": 50},
              # The seats' developer: a harness asks for up to the window's output (4096 tokens,
              # $409.60 at the price above), which a budget must hold to admit it.
              SEAT_DEVELOPER: {"team": "platform", "maxBudget": 5000},
              CHECK_DEVELOPER: {"team": "platform", "maxBudget": 5000},
              "dee": {"team": "platform", "maxBudget": BUDGET},
              "eve": {"team": "research", "maxBudget": BUDGET}}
SANDBOX_NS = "agents-it"
# The node guard's namespace and DaemonSet.
GUARD_NS, GUARD_DAEMON_SET = manifests.guard_namespace(SANDBOX_NS), manifests.GUARD
# Outside the sandbox: a package mirror stand-in (a static file server, Python's http.server from
# the seat image) that the sandbox declares by its pod's address and one port, a second port of
# the same server, which it does not, and the frontier provider's stand-in in a pod of its own
# (localhosts/standins/frontier_standin.py, which the sandbox does not declare either).
OUTSIDE_NS = "outside-it"
MIRROR_PORT, OTHER_PORT, FRONTIER_PORT = 3141, 8160, 8161
# The frontier's stand-in and what it imports, as paths under localhosts/ (a ConfigMap's keys are
# flat: each goes to its path through the volume's items).
FRONTIER_STANDIN = ("__init__.py", "standins/__init__.py", "standins/http_standin.py",
                    "standins/frontier_standin.py")
# One seat per harness: the seat image holds all four (localhosts/images/seat_image.py).
SEATS = {f"{SEAT_DEVELOPER}-{h.split('-')[0]}": h for h in HARNESSES}
BUDGET_REFUSALS = {"spear_budget_exceeded", "budget_exceeded"}
BACKUP_KEY = "incluster-backup-passphrase-0123456789abcd"
BACKUPS_KEPT = 2


def gateway_config() -> dict[str, Any]:
    local = yaml.safe_load((REPO / "stacks" / "Pulumi.local.yaml").read_text())["config"]
    gateway = {k: v for k, v in local["spear-fleet:gateway"].items()
               if k not in ("ssh", "runtimeDir", "listen")}
    image = gateway_image.ensure_image(gateway["litellm"]["version"])
    gateway.update(
        kubernetes={"namespace": GATEWAY_NS, "replicas": REPLICAS, "image": image.ref,
                    "serviceIP": GATEWAY_IP, "tls": {"name": TLS_NAME}, "nodePort": NODE_PORT},
        database={"location": "external"})
    gateway["coder"] = {**gateway["coder"], "upstreams": ["vllmFleet"],
                        "pricePerMillionTokensUsd": {"input": INPUT_USD_PER_MILLION,
                                                     "output": OUTPUT_USD_PER_MILLION}}
    return gateway


def run_outside(client, name: str, container: dict[str, Any], **spec: Any) -> None:
    """A pod of one container started in OUTSIDE_NS, once it runs."""
    client.create(f"/api/v1/namespaces/{OUTSIDE_NS}/pods", {
        "metadata": {"name": name},
        "spec": {"automountServiceAccountToken": False, **spec,
                 "containers": [{"name": name, "imagePullPolicy": "Never", **container}]}})
    path = f"/api/v1/namespaces/{OUTSIDE_NS}/pods/{name}"
    assert wait_until(lambda: (client.get(path) or {}).get("status", {}).get("phase") == "Running",
                      120), client.get(path)


def outside_address(client, name: str) -> str:
    return client.get(f"/api/v1/namespaces/{OUTSIDE_NS}/pods/{name}")["status"]["podIP"]


def start_outside(client, image: str) -> None:
    """The mirror's and the frontier's stand-ins in OUTSIDE_NS, on the seat image's Python (the
    frontier's code from a ConfigMap: it needs nothing but the standard library)."""
    python = f"{seat_image.PYTHON_ROOT}/bin/{seat_image.PYTHON}"
    client.create("/api/v1/namespaces", {"metadata": {"name": OUTSIDE_NS}})
    wait_until(lambda: client.get(f"/api/v1/namespaces/{OUTSIDE_NS}/serviceaccounts/default"), 60)
    run_outside(client, "mirror", {
        "image": image, "command": ["sh", "-c", f"{python} -m http.server -d /tmp {MIRROR_PORT}"
                                                f" & exec {python} -m http.server -d /tmp {OTHER_PORT}"]})
    client.create(f"/api/v1/namespaces/{OUTSIDE_NS}/configmaps", {
        "metadata": {"name": "frontier-standin"},
        "data": {path.replace("/", "."): "" if path.endswith("__init__.py")
                 else (REPO / "localhosts" / path).read_text() for path in FRONTIER_STANDIN}})
    run_outside(client, "frontier", {
        "image": image, "env": [{"name": "PYTHONPATH", "value": "/standin"}],
        "command": [python, "-m", "localhosts.standins.frontier_standin", "--host", "0.0.0.0",
                    "--port", str(FRONTIER_PORT), "--api-key", "sk-ant-outside"],
        "volumeMounts": [{"name": "code", "mountPath": "/standin/localhosts", "readOnly": True}]},
        volumes=[{"name": "code", "configMap": {"name": "frontier-standin", "items": [
            {"key": path.replace("/", "."), "path": path} for path in FRONTIER_STANDIN]}}])


@pytest.fixture(scope="module")
def backups(tmp_path_factory):
    """The node's folder the gateway's backup CronJob writes to (hostPath), its pods' user's."""
    folder = tmp_path_factory.mktemp("gateway-backups")
    os.chown(folder, 1000, 1000)
    folder.chmod(0o700)
    return folder


@pytest.fixture(scope="module")
def stand(kube_cluster, tmp_path_factory, backups):
    """The stack, its database (on the node's address, so the pods reach it), the stand-ins
    outside the sandbox and the cluster."""
    client = kube_cluster.client()
    clear(client, [FLEET_NS, GATEWAY_NS], [f"{FLEET_NS}-vllm-model-cache"])
    clear(client, [SANDBOX_NS, GUARD_NS, OUTSIDE_NS])
    gateway = gateway_config()
    seats, guard = seat_image.ensure_image(), node_guard_image.ensure_image()
    kubenode.import_images([gateway_image.ensure_image(gateway["litellm"]["version"]).archive,
                            seats.archive, guard.archive])
    start_outside(client, seats.ref)
    mirror = outside_address(client, "mirror")
    workdir = tmp_path_factory.mktemp("incluster")
    with postgres_database(also_listen=kubenode.NODE_IP, clients=kubenode.POD_CIDR) as db:
        project = without_inference_hosts(workdir, engine_env())
        key = workdir / "id_ed25519"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        hosts = local_inference_hosts()
        hosts["inferenceHosts"]["local"]["ssh"]["privateKeyPath"] = str(key)
        gateway["database"]["backup"] = {"hostPath": str(backups), "keep": BACKUPS_KEPT}
        project.new_stack(STACK, {
            **hosts,
            "gateway": gateway,
            "developers": {name: {**extra, "budgetDuration": "30d"}
                           for name, extra in DEVELOPERS.items()},
            "vllmFleet": {
                "kubeconfig": str(kube_cluster.kubeconfig), "namespace": FLEET_NS,
                "image": "localhost/spear-fleet/vllm-standin", "servedModelName": "qwen3-coder-next",
                "stable": STABLE_PAIR, "replicas": 1, "tensorParallelSize": 2,
                # A real harness's first turn is up to 13,538 tokens (docs/BENCHMARKS.md).
                "maxModelLen": 32768, "serviceIPs": {"stable": STABLE_IP},
                "modelCache": {"size": "1Gi", "hostPath": str(workdir / "model-cache"),
                               "accessMode": "ReadWriteOnce"},
                "agentSandbox": {
                    "namespace": SANDBOX_NS,
                    # By digest alone: a tag that names no harness versions (unlike
                    # seat_image's own), so a bump reaches the dialect check at `up` (the
                    # README's rollout test shows a recipe-tagged image refused at preview).
                    "seatImage": f"{seat_image.REPOSITORY}@{seats.digest}",
                    "nodeGuard": {"image": guard.pinned, "apiServer": kube_cluster.server},
                    "runtimeClass": kubenode.GVISOR_RUNTIME_CLASS,
                    "dialectCheckDeveloper": CHECK_DEVELOPER,
                    "mirrors": {"pypi": {"cidr": f"{mirror}/32", "ports": [MIRROR_PORT]}},
                    "seats": {seat: {"developer": SEAT_DEVELOPER, "harness": harness}
                              for seat, harness in SEATS.items()}},
            },
        })
        url = db.url.replace("@127.0.0.1:", f"@{kubenode.NODE_IP}:")
        for name, value in (("gatewayMasterKey", MASTER_KEY), ("frontierApiKey", FRONTIER_KEY),
                            ("vllmApiKey", API_KEY), ("gatewayDatabaseUrl", url),
                            ("gatewayTlsCertificate", TLS_CERTIFICATE), ("gatewayTlsKey", TLS_KEY),
                            ("gatewayBackupKey", BACKUP_KEY)):
            project.pulumi("config", "set", "--secret", "--stack", STACK, f"spear-fleet:{name}",
                           stdin=value)
        yield project, client, db
        down = project.destroy(STACK)
        assert down.ok, down.output[-6000:]
        # The seats gone first, the node guard then takes its table off the node.
        assert wait_until(lambda: not guard_table(), 60)
        clear(client, [OUTSIDE_NS])
        for path in (f"/api/v1/namespaces/{GATEWAY_NS}", f"/api/v1/namespaces/{FLEET_NS}",
                     f"/api/v1/namespaces/{SANDBOX_NS}", f"/api/v1/namespaces/{GUARD_NS}"):
            assert (client.get(path) or {}).get("status", {}).get("phase") in (None, "Terminating")


def gateway_pods(client) -> list[dict[str, Any]]:
    items = client.get(f"/api/v1/namespaces/{GATEWAY_NS}/pods?labelSelector="
                       "app.kubernetes.io%2Fname%3Dspear-gateway")["items"]
    return [p for p in items if p["status"].get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")]


def keys(project: Project) -> dict[str, str]:
    harnesses = project.outputs(STACK)["harnesses"]
    return {dev: developer_key(harnesses[dev]) for dev in DEVELOPERS}


def tls_root() -> str:
    """The bundle's last certificate: the root the gateway's clients trust."""
    last = TLS_CERTIFICATE.rindex("-----BEGIN CERTIFICATE-----")
    return TLS_CERTIFICATE[last:]


class ToPod(http.client.HTTPSConnection):
    """HTTPS to one replica at its pod's address, its certificate checked against the gateway's
    TLS name and the root it was issued under."""

    def __init__(self, pod_ip: str) -> None:
        context = ssl.create_default_context(cadata=TLS_CERTIFICATE)
        super().__init__(pod_ip, PORT, timeout=300, context=context)

    def connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=TLS_NAME)


def ask(pod_ip: str, key: str) -> tuple[int, dict[str, str], dict[str, Any]]:
    """One `coder` chat completion from one replica, at its pod's address."""
    connection = ToPod(pod_ip)
    try:
        connection.request("POST", "/v1/chat/completions", json.dumps(BODY), {
            "Content-Type": "application/json", "Authorization": f"Bearer {key}"})
        answer = connection.getresponse()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, \
            json.loads(answer.read() or b"{}")
    finally:
        connection.close()


def refusal(answer: dict[str, Any]) -> str | None:
    return (answer.get("error") or {}).get("type")


def spent(db, key: str) -> float:
    """The key's settled spend in the shared ledger (hosts/gateway/spear_gateway/pg_store.py)."""
    nanos = db.psql("SELECT COALESCE(SUM(used_nanos), 0) FROM spear_gateway.spear_budget_keys k"
                    " JOIN \"LiteLLM_VerificationToken\" t ON t.token = k.key"
                    f" WHERE t.key_alias = '{key}'")
    return int(nanos) / 1e9


def in_flight(db) -> int:
    return int(db.psql("SELECT count(*) FROM spear_gateway.spear_budget_requests WHERE NOT settled"))


def failed_checks(client) -> str:
    """What each failed dialect check's harness printed (the `up` says only its exit status)
    and, when one failed, what the gateway's pods logged: a harness may print only the status
    it got (Codex says "high demand" for any 500)."""
    def log(namespace: str, pod: str, container: str, lines: int) -> str:
        return f"\n--- {pod} ({container}):\n" + str(client.request(
            "GET", f"/api/v1/namespaces/{namespace}/pods/{pod}/log?container={container}"
                   f"&tailLines={lines}")[1])

    failed = [pod["metadata"]["name"] for pod in client.get(
        f"/api/v1/namespaces/{SANDBOX_NS}/pods?labelSelector="
        f"{urllib.parse.quote(seats.DIALECT_CHECK)}")["items"]
        if pod["status"].get("phase") == "Failed"]
    return "".join([*(log(SANDBOX_NS, pod, "harness", 60) for pod in failed),
                    *(log(GATEWAY_NS, pod["metadata"]["name"], "litellm", 80)
                      for pod in (gateway_pods(client) if failed else []))])


def test_up_runs_two_proven_replicas_on_one_database_and_every_developer_is_served_by_the_fleet(
        stand):
    project, client, db = stand
    up = project.up(STACK)
    assert up.ok, up.output[-8000:] + failed_checks(client)
    pods = gateway_pods(client)
    assert len(pods) == REPLICAS and all(
        c["ready"] for p in pods for c in p["status"]["containerStatuses"])
    # Each pod proved the fleet's route before LiteLLM started.
    for pod in pods:
        [prove] = pod["status"]["initContainerStatuses"]
        assert (prove["name"], prove["state"]["terminated"]["exitCode"]) == ("prove-routes", 0)
    [job] = client.get(f"/apis/batch/v1/namespaces/{GATEWAY_NS}/jobs")["items"]
    assert job["status"].get("succeeded") == 1
    assert int(db.psql("SELECT count(*) FROM spear_applied_migrations")) > 50
    assert int(db.psql('SELECT count(*) FROM "LiteLLM_VerificationToken"')) == len(DEVELOPERS)
    gateway = project.outputs(STACK)["gateway"]
    assert (gateway["placement"], gateway["ready_replicas"], gateway["cluster_ip"]) == (
        "kubernetes", REPLICAS, GATEWAY_IP)
    # HTTPS by its name at the node port for developers; keys and smoke tests went through the
    # API server's proxy over it.
    assert gateway["url"] == f"https://{TLS_NAME}:{NODE_PORT}"
    assert gateway["tls"] == {"name": TLS_NAME, "root": tls_root()}
    for dev in DEVELOPERS:
        assert gateway["smoke_tests"][dev] == "end_turn | SPEAR-BACKEND-OK | ()"
        [served] = gateway["served_by"][dev]
        assert served.startswith("vllm-stable (vllm-stable-"), served
    # The proxy's credentials are in the Secret, never in the ConfigMap or the state in clear.
    state = project.state_text(STACK)
    for secret in (MASTER_KEY, FRONTIER_KEY, API_KEY, db.password, TLS_KEY.splitlines()[1]):
        assert secret not in state
    config = client.get(f"/api/v1/namespaces/{GATEWAY_NS}/configmaps/spear-gateway-config")
    assert MASTER_KEY not in json.dumps(config) and db.password not in json.dumps(config)


def test_a_second_up_changes_nothing(stand):
    project, _, _ = stand
    again = project.up(STACK)
    assert again.ok, again.output[-6000:]
    assert set(again.changes()) == {"same"}, again.changes()


def test_each_replica_serves_with_the_keys_of_the_shared_database(stand):
    project, client, _ = stand
    ana = keys(project)["ana"]
    for pod in gateway_pods(client):
        status, headers, answer = ask(pod["status"]["podIP"], ana)
        assert status == 200, answer
        assert headers["x-litellm-model-id"] == "vllm-stable"
        assert answer["choices"][0]["message"]["content"] == "SPEAR-BACKEND-OK"
        assert ask(pod["status"]["podIP"], "sk-not-a-key")[0] == 401
        # Nothing but HTTPS: a plain HTTP request is no answer.
        plain = http.client.HTTPConnection(pod["status"]["podIP"], PORT, timeout=10)
        with pytest.raises((http.client.HTTPException, ConnectionError)):
            plain.request("GET", "/health/liveliness")
            plain.getresponse()
        plain.close()


def in_seat(kubeconfig, seat: str, command: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    """`command` run in the seat's harness container, as a developer's `kubectl exec` runs it."""
    return subprocess.run([str(kubebuild.kubernetes().path("kubectl")), "--kubeconfig", str(kubeconfig),
                           "-n", SANDBOX_NS, "exec", f"deploy/seat-{seat}", "-c", "harness", "--",
                           *command], capture_output=True, text=True, timeout=timeout)


def fleet_requests(db, developer: str) -> int:
    """The requests LiteLLM logged for the developer's key that the fleet's stable track served."""
    return int(db.psql('SELECT count(*) FROM "LiteLLM_SpendLogs" s JOIN "LiteLLM_VerificationToken"'
                       " t ON t.token = s.api_key WHERE t.metadata->>'developer' = "
                       f"'{developer}' AND s.model_id = 'vllm-stable'"))


# What a seat runs with, read inside it: its user and group, whether the root and the working copy
# take a new file, a service account token, its effective capabilities.
SANDBOX_PROBE = ("id -u; id -g; (touch /opt/probe 2>/dev/null && echo root-writable) || echo root-read-only;"
                 " (touch /workspace/probe && echo workspace-writable) || echo workspace-read-only;"
                 " (ls /var/run/secrets/kubernetes.io >/dev/null 2>&1 && echo token) || echo no-token;"
                 " grep CapEff /proc/self/status")


def test_each_seat_runs_as_user_1000_on_a_read_only_root_with_no_token_and_only_its_key(stand, kube_cluster):
    project, client, _ = stand
    outputs = project.outputs(STACK)["seats"]
    key = keys(project)[SEAT_DEVELOPER]
    assert set(outputs) == set(SEATS)
    for seat, harness in SEATS.items():
        probe = in_seat(kube_cluster.kubeconfig, seat, ["sh", "-c", SANDBOX_PROBE])
        assert probe.returncode == 0, probe.stderr
        assert probe.stdout.split("\n")[:5] == ["1000", "1000", "root-read-only", "workspace-writable",
                                                 "no-token"], probe.stdout
        assert probe.stdout.split("\n")[5].split() == ["CapEff:", "0000000000000000"], probe.stdout
        # The key reaches the seat as an environment variable from its Secret, and nowhere else.
        env = in_seat(kube_cluster.kubeconfig, seat, ["env"]).stdout
        assert sum(line.endswith(f"={key}") for line in env.splitlines()) == 1, seat
        [pod] = client.get(f"/api/v1/namespaces/{SANDBOX_NS}/pods?labelSelector="
                           f"spear-fleet%2Fseat%3D{seat}")["items"]
        assert key not in json.dumps(pod["spec"])
        # The harness the stack pins, at that version, is the one in the seat.
        version = in_seat(kube_cluster.kubeconfig, seat, [ONE_TURN[harness][0], "--version"])
        assert outputs[seat]["version"] in version.stdout, (seat, version.stdout, version.stderr)


# The fleet's scripted model answers a request that offers tools with a tool call; the harness
# runs it and sends the result, and the model then answers (tiny_model.SMOKE_ANSWER): two
# requests. Held to the tools the harness offers (llama-server's grammar), the call names one of
# them, drawn at random but the same every run (the serving image's seed). Were that OpenHands'
# `finish` tool, its turn would end at once: one request, and the finish call in its --json
# events instead of an answer.
FINISHED = '"kind": "FinishAction"'


def turn_requests(output: str) -> int:
    return 1 if FINISHED in output else 2


def test_each_real_harness_completes_a_turn_in_its_seat_through_the_gateway_to_the_fleet(
        stand, kube_cluster):
    project, _, db = stand
    for seat, harness in SEATS.items():
        in_seat(kube_cluster.kubeconfig, seat, ["sh", "-c", "mkdir -p src && echo 'print(42)' > src/app.py"])
        before = fleet_requests(db, SEAT_DEVELOPER)
        turn = in_seat(kube_cluster.kubeconfig, seat, ONE_TURN[harness], timeout=900)
        assert turn.returncode == 0, (seat, turn.stdout[-3000:], turn.stderr[-3000:])
        # The requests of the turn, served by the fleet on the seat developer's key (LiteLLM
        # writes its spend logs a few seconds after it answers).
        assert wait_until(lambda: fleet_requests(db, SEAT_DEVELOPER) >= before + turn_requests(
            turn.stdout), 120), (seat, fleet_requests(db, SEAT_DEVELOPER) - before,
                                 turn.stdout[-3000:])
        assert tiny_model.SMOKE_ANSWER in turn.stdout or (
            harness == OPENHANDS and FINISHED in turn.stdout), (seat, turn.stdout[-3000:])


def test_a_developer_on_this_machine_reaches_the_gateway_by_name_over_tls_with_harness_envs_wiring(
        stand, tmp_path):
    project, _, db = stand
    outputs = tmp_path / "harnesses.json"
    outputs.write_text(project.pulumi("stack", "output", "harnesses", "--show-secrets", "--json",
                                      "--stack", STACK).stdout)
    # The developer's DNS resolves the gateway's name to a node: here a hosts file of the turn's
    # own (a mount namespace), so this machine's is never touched.
    hosts = tmp_path / "hosts"
    hosts.write_text(f"127.0.0.1 localhost\n{kubenode.NODE_IP} {TLS_NAME}\n")
    home, workspace = tmp_path / "home", tmp_path / "workspace"
    (workspace / "src").mkdir(parents=True)
    (workspace / "src" / "app.py").write_text("print(42)\n")
    home.mkdir()
    qwen = harness_install.install(QWEN_CODE, DEFAULT_VERSIONS[QWEN_CODE])
    script = (f'eval "$({REPO}/scripts/harness-env {SEAT_DEVELOPER} {QWEN_CODE} --write'
              f' --outputs-json {outputs})"\n'
              f'case "$OPENAI_BASE_URL" in https://{TLS_NAME}:{NODE_PORT}/v1) ;; *) exit 9 ;; esac\n'
              f'exec {qwen} {" ".join(map(shlex.quote, ONE_TURN[QWEN_CODE][1:]))}')
    before = fleet_requests(db, SEAT_DEVELOPER)
    turn = subprocess.run(["unshare", "--mount", "sh", "-c", f"mount --bind {hosts} /etc/hosts"
                           f" && exec sh -c {shlex.quote(script)}"], cwd=workspace,
                          env={"PATH": os.environ["PATH"], "HOME": str(home)},
                          capture_output=True, text=True, timeout=600)
    assert turn.returncode == 0, (turn.stdout[-3000:], turn.stderr[-3000:])
    assert tiny_model.SMOKE_ANSWER in turn.stdout, turn.stdout[-3000:]
    # The root it trusted is the one harness-env wrote, and the fleet served the turn.
    assert (home / ".config" / "spear-fleet" / "gateway-ca.pem").read_text() == tls_root()
    assert wait_until(lambda: fleet_requests(db, SEAT_DEVELOPER) >= before + 2, 120)


def test_the_sandbox_allows_exactly_the_gateways_pods_on_its_port_taken_from_the_gateway(stand):
    _, client, _ = stand
    mirror = outside_address(client, "mirror")
    allow = client.get(f"/apis/networking.k8s.io/v1/namespaces/{SANDBOX_NS}/networkpolicies/allow-egress")
    assert allow["spec"]["egress"] == [{"to": [pods_peer(GATEWAY_NS, GATEWAY_POD_LABELS)],
                                        "ports": [{"protocol": "TCP", "port": PORT}]},
                                       {"to": [{"ipBlock": {"cidr": f"{mirror}/32"}}],
                                        "ports": [{"protocol": "TCP", "port": MIRROR_PORT}]}]


# A TCP connection tried from inside a seat: "answered", or why not. The enforcer drops a refused
# connection's first packet, so it times out.
REACH = ("import socket, sys\n"
         "try:\n"
         "    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3).close()\n"
         "    print('answered')\n"
         "except OSError as error:\n"
         "    print(error)\n")


def reach_from_seat(kubeconfig, seat: str, address: str, port: int) -> str:
    done = in_seat(kubeconfig, seat, [f"{seat_image.PYTHON_ROOT}/bin/{seat_image.PYTHON}", "-c",
                                      REACH, address, str(port)])
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def reach_from_here(address: str, port: int) -> bool:
    try:
        socket.create_connection((address, port), timeout=3).close()
        return True
    except OSError:
        return False


def frontier_answers_here(address: str) -> bool:
    """The frontier stand-in answers a Messages call from outside the sandbox."""
    request = urllib.request.Request(
        f"http://{address}:{FRONTIER_PORT}/v1/messages", data=json.dumps({
            "model": "claude-standin", "max_tokens": 8,
            "messages": [{"role": "user", "content": "hi"}]}).encode(),
        headers={"x-api-key": "sk-ant-outside", "anthropic-version": "2023-06-01",
                 "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return frontier_standin.DEFAULT_REPLY in answer.read().decode()


def test_a_seat_reaches_the_gateway_and_its_mirror_and_no_other_pod_or_port(stand, kube_cluster):
    _, client, _ = stand
    mirror, frontier = outside_address(client, "mirror"), outside_address(client, "frontier")
    fleet = next(pod["status"]["podIP"] for pod in client.get(
        f"/api/v1/namespaces/{FLEET_NS}/pods")["items"] if pod["status"].get("phase") == "Running")
    targets = {"the gateway's Service": (GATEWAY_IP, PORT), "the mirror": (mirror, MIRROR_PORT),
               "the mirror's other port": (mirror, OTHER_PORT),
               "the frontier stand-in": (frontier, FRONTIER_PORT),
               "a fleet pod, past the gateway": (fleet, 8000)}
    for seat in SEATS:
        reached = {name: reach_from_seat(kube_cluster.kubeconfig, seat, *target)
                   for name, target in targets.items()}
        assert {name for name, answer in reached.items() if answer == "answered"} == {
            "the gateway's Service", "the mirror"}, (seat, reached)
        # Refused by the node guard, which judges a seat's packets before the NetworkPolicy
        # enforcer would drop them (test_a_seat_reaches_nothing_of_its_node... shows the guard).
        assert reached["the mirror's other port"] == reached["the frontier stand-in"] \
            == reached["a fleet pod, past the gateway"] == GUARDED, (seat, reached)
    # What a seat does not reach answers outside the sandbox: the policy refused it, not its absence.
    assert reach_from_here(mirror, OTHER_PORT) and reach_from_here(fleet, 8000)
    assert frontier_answers_here(frontier)


# What the node guard's reject looks like from inside a seat (ICMP admin-prohibited): not
# "Connection refused" (nothing listens) nor a timeout (a NetworkPolicy's drop).
GUARDED = "[Errno 113] No route to host"
HOST_PORT = 18097  # a host port the test opens on the node's address
METADATA = "169.254.169.254"
METADATA_LINK = "spear-md0"  # the test's own link for it (a port-less bridge: no dummy links here)


class Listener:
    """A TCP listener of the test's own on this machine (the node), accepting in a thread."""

    def __init__(self, address: str, port: int) -> None:
        self.sock = socket.create_server((address, port))
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                self.sock.accept()[0].close()
            except OSError:
                return

    def close(self) -> None:
        self.sock.close()


@contextlib.contextmanager
def node_listeners():
    """A host port on the node's address, and the cloud metadata address bound on a link of the
    test's own on the node with a listener on it, so that nothing leaves this machine and a seat
    that is not filtered reaches them; both gone after."""
    subprocess.run(["ip", "link", "add", METADATA_LINK, "type", "bridge"], check=True)
    listeners = []
    try:
        subprocess.run(["ip", "addr", "add", f"{METADATA}/32", "dev", METADATA_LINK], check=True)
        subprocess.run(["ip", "link", "set", METADATA_LINK, "up"], check=True)
        listeners = [Listener(kubenode.NODE_IP, HOST_PORT), Listener(METADATA, 80)]
        yield
    finally:
        for listener in listeners:
            listener.close()
        subprocess.run(["ip", "link", "del", METADATA_LINK], check=False)


def node_targets(db, kube_cluster) -> dict[str, tuple[str, int]]:
    api_port = int(urllib.parse.urlsplit(kube_cluster.server).port)
    return {"the kubelet": (kubenode.NODE_IP, kubenode.KUBELET_PORT),
            "a host port": (kubenode.NODE_IP, HOST_PORT),
            "the API server's port on the node": (kubenode.NODE_IP, api_port),
            "the gateway's database on the node": (kubenode.NODE_IP, db.port),
            "the metadata address": (METADATA, 80)}




def guard_table() -> bool:
    return subprocess.run(["nft", "list", "table", "inet", node_guard.TABLE],
                          capture_output=True).returncode == 0


def test_a_seat_reaches_nothing_of_its_node_and_without_the_guard_it_would(stand, kube_cluster):
    _, client, db = stand
    targets = node_targets(db, kube_cluster)
    with node_listeners():
        for seat in SEATS:
            reached = {name: reach_from_seat(kube_cluster.kubeconfig, seat, *target)
                       for name, target in targets.items()}
            assert set(reached.values()) == {GUARDED}, (seat, reached)
            # ... and the gateway still answers, by its Service's address.
            assert reach_from_seat(kube_cluster.kubeconfig, seat, GATEWAY_IP, PORT) == "answered"
        # The guard removed (its DaemonSet kept off the node, its table deleted): the same seat
        # reaches its node, the test's own listeners among it.
        path = f"/apis/apps/v1/namespaces/{GUARD_NS}/daemonsets/{GUARD_DAEMON_SET}"
        client.patch(path, [{"op": "add", "path": "/spec/template/spec/nodeSelector",
                             "value": {"spear-fleet/no-such-node": "true"}}])
        try:
            assert wait_until(lambda: not client.get(
                f"/api/v1/namespaces/{GUARD_NS}/pods")["items"], 60)
            subprocess.run(["nft", "delete", "table", "inet", node_guard.TABLE], check=True)
            seat = next(iter(SEATS))
            unguarded = {name: reach_from_seat(kube_cluster.kubeconfig, seat, *target)
                         for name, target in targets.items()}
            assert unguarded["the kubelet"] == unguarded["a host port"] == \
                unguarded["the gateway's database on the node"] == \
                unguarded["the metadata address"] == "answered", unguarded
            assert unguarded["the API server's port on the node"] != GUARDED, unguarded
        finally:
            client.patch(path, [{"op": "remove", "path": "/spec/template/spec/nodeSelector"}])
        assert wait_until(guard_table, 60)
        assert reach_from_seat(kube_cluster.kubeconfig, next(iter(SEATS)), kubenode.NODE_IP,
                               HOST_PORT) == GUARDED


def test_each_seat_runs_on_gvisors_kernel_not_the_nodes(stand, kube_cluster):
    node_kernel = open("/proc/version").read()
    for seat in SEATS:
        done = in_seat(kube_cluster.kubeconfig, seat, ["cat", "/proc/version"])
        assert done.returncode == 0, done.stderr
        assert "-gvisor" in done.stdout and done.stdout != node_kernel, (seat, done.stdout)


def reach_from_outside(kubeconfig, address: str, port: int) -> str:
    """From the mirror's pod in another namespace (OUTSIDE_NS), outside the sandbox."""
    python = f"{seat_image.PYTHON_ROOT}/bin/{seat_image.PYTHON}"
    done = subprocess.run([str(kubebuild.kubernetes().path("kubectl")), "--kubeconfig",
                           str(kubeconfig), "-n", OUTSIDE_NS, "exec", "mirror", "--", python,
                           "-c", REACH, address, str(port)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_only_the_gateway_reaches_the_fleets_pods_and_without_the_policy_another_namespace_would(
        stand, kube_cluster):
    _, client, _ = stand
    fleet_pods = [pod["status"]["podIP"] for pod in client.get(
        f"/api/v1/namespaces/{FLEET_NS}/pods?labelSelector=app%3Dvllm")["items"]
        if pod["status"].get("phase") == "Running"]
    assert fleet_pods
    for address in fleet_pods:
        assert reach_from_outside(kube_cluster.kubeconfig, address, 8000) == "timed out"
    # The gateway's pods are served (every developer's smoke test above went through them);
    # without the policy the other namespace reaches the same pod.
    path = f"/apis/networking.k8s.io/v1/namespaces/{FLEET_NS}/networkpolicies"
    policy = client.get(f"{path}/vllm-ingress")
    status, body = client.request("DELETE", f"{path}/vllm-ingress")
    assert status == 200, body
    try:
        assert wait_until(lambda: reach_from_outside(kube_cluster.kubeconfig, fleet_pods[0], 8000)
                          == "answered", 30)
    finally:
        client.create(path, {"metadata": {"name": "vllm-ingress", "namespace": FLEET_NS,
                                          "labels": policy["metadata"].get("labels", {}),
                                          "annotations": policy["metadata"].get("annotations", {})},
                             "spec": policy["spec"]})
    assert wait_until(lambda: reach_from_outside(kube_cluster.kubeconfig, fleet_pods[0], 8000)
                      == "timed out", 30)


def check_log(client, harness: str) -> str:
    """What the harness's dialect check printed (its Job's one pod)."""
    [pod] = client.get(f"/api/v1/namespaces/{SANDBOX_NS}/pods?labelSelector="
                       f"job-name%3Dseat-dialect-{harness}")["items"]
    _, log = client.request("GET", f"/api/v1/namespaces/{SANDBOX_NS}/pods/"
                                   f"{pod['metadata']['name']}/log?container=harness")
    return str(log)


def test_each_seated_harness_passed_its_dialect_check_on_the_ci_key_and_a_bump_runs_it_again(stand):
    project, client, db = stand
    jobs = {job["metadata"]["labels"][seats.DIALECT_CHECK]: job for job in client.get(
        f"/apis/batch/v1/namespaces/{SANDBOX_NS}/jobs")["items"]}
    assert set(jobs) == set(SEATS.values())
    assert all(job["status"].get("succeeded") == 1 for job in jobs.values()), jobs
    # Each check's turn (turn_requests: the model's tool call and its answer), on the CI key.
    logs = {harness: check_log(client, harness) for harness in jobs}
    expected = sum(turn_requests(log) for log in logs.values())
    assert wait_until(lambda: fleet_requests(db, CHECK_DEVELOPER) >= expected, 120), \
        (fleet_requests(db, CHECK_DEVELOPER), expected)
    pinned = project.outputs(STACK)["seats"]["sam-codex"]["version"]
    project.set_config(STACK, "harnesses.codex", "0.170.0")
    try:
        steps = {step["urn"].rsplit("::", 1)[-1]: step["op"]
                 for step in project.preview(STACK)["steps"]}
        assert steps["seat-dialect-codex"] in ("replace", "create-replacement"), steps
        assert steps["seat-sam-codex"] == "update", steps
        # (A preview lists no step for what stays the same.)
        assert not {"seat-dialect-qwen-code", "seat-dialect-claude-code",
                    "seat-dialect-openhands"} & set(steps), steps
        # The seat image still holds the pinned Codex: the check refuses the bump, and the seat
        # is not moved to a version its image does not hold.
        bumped = project.up(STACK)
        assert not bumped.ok and "seat-dialect-codex" in bumped.output, bumped.output[-6000:]
        # The `up` says why: the check's last lines are its termination message.
        assert "the stack pins 0.170.0" in bumped.output, bumped.output[-6000:]
        log = check_log(client, "codex")
        assert "the stack pins 0.170.0" in log and pinned in log, log
        seat = client.get(f"/apis/apps/v1/namespaces/{SANDBOX_NS}/deployments/seat-sam-codex")
        assert seat["spec"]["template"]["metadata"]["annotations"][seats.HARNESS_VERSION] == pinned
    finally:
        project.set_object(STACK, "harnesses", None)
    back = project.up(STACK)
    assert back.ok, back.output[-6000:]


def test_a_canary_whose_proof_fails_stops_the_up_and_the_proven_pods_serve_on(stand):
    project, client, _ = stand
    before = {p["metadata"]["name"] for p in gateway_pods(client)}
    project.set_object(STACK, "vllmFleet.serviceIPs", {"stable": STABLE_IP, "canary": CANARY_IP})
    project.set_object(STACK, "vllmFleet.canary", {**CANARY_PAIR, "model": TRAP_MODEL})
    failed = project.up(STACK)
    assert not failed.ok
    assert ("gateway pod spear-gateway-" in failed.output and "prove-routes failed: endpoint"
            " vllm-canary: tool-call probe failed: parser-not-configured" in failed.output), \
        failed.output[-6000:]
    # The rollout stopped at its first new pod: the pods before it serve what they proved.
    assert {p["metadata"]["name"] for p in gateway_pods(client)} == before
    ana = keys(project)["ana"]
    for pod in gateway_pods(client):
        status, headers, _ = ask(pod["status"]["podIP"], ana)
        assert (status, headers["x-litellm-model-id"]) == (200, "vllm-stable")
    project.set_object(STACK, "vllmFleet.canary", None)
    fixed = project.up(STACK)
    assert fixed.ok, fixed.output[-6000:]
    assert {p["metadata"]["name"] for p in gateway_pods(client)} == before


def test_requests_alternating_between_replicas_stop_where_the_one_ledger_says_the_budget_is_spent(
        stand):
    """A ledger per replica would let each admit until its own count reached the budget: about
    twice as many requests, and a spend over the budget."""
    project, client, db = stand
    dee = keys(project)["dee"]
    ips = [p["status"]["podIP"] for p in gateway_pods(client)]
    worst = worst_case_usd(BODY, PRICES, BODY["max_tokens"])
    served = {ip: 0 for ip in ips}
    for i in range(40):
        ip = ips[i % len(ips)]
        # LiteLLM logs success (where the hook settles) after it has sent the answer: the last
        # request's hold may still be held, and the next one rightly refused against it.
        assert wait_until(lambda: in_flight(db) == 0, 30), "a served request never settled"
        before = spent(db, "dee")
        status, _, answer = ask(ip, dee)
        if status != 200:
            assert (status, refusal(answer)) in {(429, r) for r in BUDGET_REFUSALS}, answer
            # Refused exactly when the settled spend leaves no room for the worst case.
            assert before + worst > BUDGET >= before
            break
        served[ip] += 1
    else:
        pytest.fail(f"never refused in 40 requests: {served}, spent {spent(db, 'dee')}")
    assert all(count >= 1 for count in served.values()), served
    assert spent(db, "dee") <= BUDGET
    # Once it is spent, every replica refuses.
    for ip in ips:
        status, _, answer = ask(ip, dee)
        assert (status, refusal(answer)) in {(429, r) for r in BUDGET_REFUSALS}, answer


def test_a_burst_over_both_replicas_never_spends_more_than_the_budget(stand):
    project, client, db = stand
    eve = keys(project)["eve"]
    ips = [p["status"]["podIP"] for p in gateway_pods(client)]
    with ThreadPoolExecutor(max_workers=12) as pool:
        outcomes = list(pool.map(lambda i: ask(ips[i % len(ips)], eve), range(12)))
    codes = [(status, refusal(answer)) for status, _, answer in outcomes]
    assert set(codes) <= {(200, None), *((429, r) for r in BUDGET_REFUSALS)}, codes
    # One worst case fits at a time: of twelve at once, some are refused.
    assert (200, None) in codes and len(set(codes)) > 1, codes
    assert spent(db, "eve") <= BUDGET
    # Every admitted request settles (in LiteLLM's success logging, just after its answer).
    assert wait_until(lambda: in_flight(db) == 0, 30), in_flight(db)
    assert spent(db, "eve") <= BUDGET



# ---------------------------------------------------------------------------------------------
# The in-cluster gateway's backups (gateway.database.backup with gateway.kubernetes), last: the
# restore moves the gateway to another database.

def dumps(backups) -> list[str]:
    return sorted(p.name for p in backups.glob("litellm-*.dump"))


def run_backup(client) -> None:
    """One run of the backup CronJob now, as `kubectl create job --from=cronjob/...` makes it."""
    cron = client.get(f"/apis/batch/v1/namespaces/{GATEWAY_NS}/cronjobs/spear-gateway-backup")
    name = f"spear-gateway-backup-now-{os.urandom(3).hex()}"
    client.create(f"/apis/batch/v1/namespaces/{GATEWAY_NS}/jobs",
                  {"metadata": {"name": name}, "spec": cron["spec"]["jobTemplate"]["spec"]})
    path = f"/apis/batch/v1/namespaces/{GATEWAY_NS}/jobs/{name}"
    assert wait_until(lambda: (client.get(path)["status"].get("succeeded") or 0)
                      + (client.get(path)["status"].get("failed") or 0) > 0, 180)
    assert client.get(path)["status"].get("succeeded") == 1, client.get(path)["status"]


def decrypted(dump) -> bytes:
    done = subprocess.run(["openssl", "enc", "-d", *CIPHER, "-pass", "stdin", "-in", str(dump)],
                          input=BACKUP_KEY.encode() + b"\n", capture_output=True, check=True)
    return done.stdout


def test_the_cluster_gateways_backups_are_encrypted_dumps_of_its_database_the_newest_kept(
        stand, backups):
    _, client, _ = stand
    runs = []
    for _ in range(BACKUPS_KEPT + 1):
        time.sleep(1)  # dumps are named by the second
        before = set(dumps(backups))
        run_backup(client)
        [made] = set(dumps(backups)) - before
        runs.append(made)
    assert dumps(backups) == runs[-BACKUPS_KEPT:]
    data = (backups / runs[-1]).read_bytes()
    assert data.startswith(b"Salted__") and b"LiteLLM_VerificationToken" not in data
    listed = subprocess.run(["pg_restore", "--list"], input=decrypted(backups / runs[-1]),
                            capture_output=True, check=True).stdout
    assert b"LiteLLM_VerificationToken" in listed and b"spear_budget_keys" in listed


def test_a_lost_cluster_database_comes_back_from_its_backup_with_every_key(stand, backups):
    project, client, db = stand
    developer_keys = keys(project)
    tokens_before = db.psql('SELECT count(*) FROM "LiteLLM_VerificationToken"')
    # The database is lost: made again, empty, where the gateway looks for it.
    admin = {**os.environ, "PGHOST": str(db.data_dir), "PGPORT": str(db.port),
             "PGUSER": "postgres", "PGDATABASE": "postgres"}
    for sql in (f"DROP DATABASE {db.name} WITH (FORCE)", f"CREATE DATABASE {db.name} OWNER {db.user}"):
        subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-c", sql], env=admin,
                       check=True)
    project.set_config(STACK, "gateway.database.restoreFrom", dumps(backups)[-1])
    update = project.up(STACK)
    assert update.ok, update.output[-8000:]
    assert update.ops()["gateway-restore"] == "create"
    assert db.psql('SELECT count(*) FROM "LiteLLM_VerificationToken"') == tokens_before
    # The replicas started anew on the restored database serve the keys as they were dumped.
    for pod in gateway_pods(client):
        client.request("DELETE", f"/api/v1/namespaces/{GATEWAY_NS}/pods/{pod['metadata']['name']}")
    assert wait_until(lambda: len([p for p in gateway_pods(client) if all(
        c.get("ready") for c in p["status"].get("containerStatuses") or [{}])]) == REPLICAS, 300)
    for pod in gateway_pods(client):
        status, _, answer = ask(pod["status"]["podIP"], developer_keys["ana"])
        assert status == 200, answer
