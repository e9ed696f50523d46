"""README.md's command blocks, run as written on the local stack, as a newcomer runs them.

`scripts/up-local` brings up the embedded default (the inference host, the gateway, the vLLM
fleet on the local Kubernetes cluster and three agent seats) and ends with every smoke test,
each developer's answered through the gateway by the inference host and by the fleet's pods
(named; the gate's stable key by the fleet's stable track alone), the fleet's rollout and where
its Prometheus answers; that Prometheus scrapes both fleet pods and the gateway's exporter with
the alert rules loaded, and fires the hatch's spend alert once the ledger records an escalation
over it; refreshed, the stack has nothing to change (what a second up-local's `pulumi up` finds;
the proofs it would run again are the first run's). Each seat's proof is one turn of its real harness
in its pod, through the gateway's HTTPS listener by name; README's seat blocks run one again,
and the end state: cyn's Claude Code creates a file in a git repository of her seat (the
fleet's stand-in scripted for that task), git shows the diff, and Prometheus reads the accepted
edit off the gateway.

Then the rollout flow's blocks: a canary and its gate, which prints PASS and whose record and
evidence hold what the gateway signed (the track and the pair that answered each side, its own
TTFT; moved to another pair, the receipts refuse it); the promotion that record allows (stable
rolls out the canary's pair, the canary is gone, the pilot ring is back on stable, the track's
throughput is measured again); and the rollback (the previous pair serves again). The fleet's
own module (test_vllm_fleet_on_kubernetes.py) leaves these to this one. `scripts/test`, the
other command, is what CI runs (tests/unit/test_readme_blocks.py holds .ci/run to it).

The blocks run in a copy of the project (tests/support/readme.py: `pulumi config set` writes the
stack file, scripts/gate the records folder), in a shell that has sourced scripts/env.sh (the
rollout's, as README says) with PULUMI_SKIP_CONFIRMATIONS=true answering `pulumi up`'s question
yes. The stack's state goes to a throwaway file backend (PULUMI_BACKEND_URL, which
scripts/env.sh keeps when set), so the developer's own `local` stack is never touched.
"""

from __future__ import annotations

import json
import os
import re
import socket
import ssl
import subprocess
import uuid
from pathlib import Path

import pytest
from spear_gateway.exporter import this_month
from spear_gateway.pg_store import PgStore

from components.agent_seats.manifests import guard_namespace
from components.cache import cache_dir
from components.hostops.waiting import wait_until
from components.vllm_fleet import alerts
from localhosts import local_stack
from localhosts.hosts.host import host_status
from localhosts.engine import REPO, upstream_source_env
from spear import receipts, rollout_gate, throughput
from spear.harness import CODEX, developer_key, seat_image_tag
from tests.support import fleet
from tests.support.config_cases import CANARY_PAIR, STABLE_PAIR
from tests.support.kube import clear
from tests.support.prometheus import Prometheus
from tests.support.readme import block_starting, command_blocks, project_copy

# The local cluster runs the fleet: its binaries and the kubernetes plugin are built from Go modules.
pytestmark = pytest.mark.kubernetes

ANSWER = re.escape("end_turn | SPEAR-BACKEND-OK | ()")
PROMETHEUS_PORT = 9090  # the local stack's (observability.prometheus, bundled)
# The local stack's: vllmFleet.namespace, agentSandbox.namespace (its default) and the model
# cache's volume.
FLEET_NAMESPACE, AGENT_NAMESPACE = "vllm", "agents"
MODEL_CACHE_VOLUME = f"{FLEET_NAMESPACE}-vllm-model-cache"
STABLE_POD = r"vllm-stable \(vllm-stable-[a-z0-9]+-[a-z0-9]+\)"
STANDIN = "localhost/spear-fleet/vllm-standin"  # the local stack's vllmFleet.image
RECORDS = "stacks/gate/local"  # its rolloutGate.records
LOOPBACK_GATEWAY = "http://127.0.0.1:4000"  # its gateway's plain-HTTP listener
BLOCKS = command_blocks((REPO / "README.md").read_text())
UP_LOCAL = block_starting(BLOCKS, "scripts/up-local")
CANARY = block_starting(BLOCKS, "pulumi config set --path --stack local vllmFleet.canary.")
PROMOTE = block_starting(BLOCKS, "pulumi config set --path --stack local vllmFleet.previous.")
ROLLBACK = block_starting(BLOCKS, "scripts/rollback")
# The promotion's config beside a harness bump its record did not run under, previewed.
TUPLE_MOVED = (PROMOTE.rsplit("pulumi up", 1)[0]
               + "pulumi config set --path --stack local harnesses.codex 0.170.0\n"
                 "pulumi preview --stack local\n")
HARNESS_BUMPED = ("pulumi config set --path --stack local harnesses.codex 0.170.0\n"
                  "pulumi preview --stack local\n")
SEAT_TURN = block_starting(BLOCKS, "scripts/seat --stack local ana --turn")
SEAT_EDIT = block_starting(BLOCKS, "scripts/seat --stack local cyn --edit")
# The local stack's seats: ana's Qwen-Code, bob's OpenHands, cyn's Claude Code, reached by name
# over TLS.
SEATS = {"ana": "qwen-code 0.24.4", "bob": "openhands 1.16.0", "cyn": "claude-code 2.1.328"}
GATEWAY_URL = "https://gateway.spear.internal:4443"


def seat_proof(seat: str) -> str:
    """The harness's answer, whoever served it: the fleet's stand-in and the inference host's
    tiny model say SPEAR-BACKEND-OK, but under a harness's tool grammar the tiny model may say
    anything (OpenHands then ends its turn with its finish tool)."""
    return (re.escape(f"seat {seat}: {SEATS[seat]} answered ") + "'.+'"
            + re.escape(f" with {seat}'s key through {GATEWAY_URL}"))


LAST_LINES = [
    f"smoke test \\(local\\): {ANSWER}",
    # The inference host and the fleet's stable Service both answered, each pod named.
    *(f"smoke test \\(gateway, coder, {developer}\\): {ANSWER}; served by local, {STABLE_POD}"
      for developer in ("ana", "bob")),
    # The stable ring's keys (cyn's, the gate's) by the fleet's stable track alone; the gate's
    # pilot-ring key like everyone else's while no canary is up.
    f"smoke test \\(gateway, coder, cyn\\): {ANSWER}; served by {STABLE_POD}",
    f"smoke test \\(gateway, coder, gate\\): {ANSWER}; served by {STABLE_POD}",
    f"smoke test \\(gateway, coder, gate-pilot\\): {ANSWER}; served by local, {STABLE_POD}",
    # The hatch's cap, and the limit only the operator can set at the provider.
    re.escape("hatch: refused over 20 USD a month, alert at 15 USD; set the monthly spend limit of"
              " frontierApiKey's account at https://api.anthropic.com to 20 USD (it cannot be set"
              " from here)"),
    # The first dump, taken by the first `up`, into a folder a fresh gateway host keeps.
    re.escape("gateway database backups: ") + r"[1-7] in /var/backups/spear-gateway \("
    + re.escape(str(cache_dir() / "hosts" / "gateway-backups")) + r" on this machine\), the first"
    r" litellm-[0-9]{8}T[0-9]{6}Z\.dump",
    re.escape("vLLM fleet (local cluster, namespace vllm): stable"
              " localhost/spear-fleet/vllm-standin:v0.24.0 revision da6e2ed, 2/2 ready"),
    re.escape("Prometheus (the fleet's and the gateway's metrics, the alert rules):"
              f" http://127.0.0.1:{PROMETHEUS_PORT}/api/v1/alerts"),
    # Per seat, the command that opens it and one turn of its harness there.
    *(line for seat in SEATS for line in (
        re.escape(f"seat {seat}: open it with: scripts/seat --stack local {seat}"), seat_proof(seat))),
]


def ends_with_the_report(stdout: str) -> bool:
    lines = stdout.strip().splitlines()[-len(LAST_LINES):]
    return len(lines) == len(LAST_LINES) and all(re.fullmatch(p, l) for p, l in zip(LAST_LINES, lines))


@pytest.fixture(scope="module")
def local(tmp_path_factory, kube_cluster):
    """The project copy the blocks run in, and their environment (a throwaway backend). The
    session's cluster is the local stack's own (one per machine: tests/support/kube.py); the
    hosts must be this module's."""
    running = [f"the `{name}` host" for name in (local_stack.LOCAL_HOST, local_stack.GATEWAY_HOST)
               if host_status(name) is not None]
    if running:
        pytest.fail(f"{' and '.join(running)} already running; stop them first:"
                    " .venv/bin/python -m localhosts.local_stack down")
    # A newcomer's machine has no hosts yet: boot both from the (cached) root filesystem, so what
    # an earlier local stack left on them (its gateway's keys, say) is not there. up-local then
    # finds them running and goes on.
    # Nor has its cluster the local stack's objects: an earlier local stack stopped without
    # `pulumi destroy` leaves them in the cluster's state, and the provider's server-side apply
    # would adopt them (old pods and all) into this fresh stack.
    clear(kube_cluster.client(), [FLEET_NAMESPACE, AGENT_NAMESPACE, guard_namespace(AGENT_NAMESPACE)],
          [MODEL_CACHE_VOLUME])
    local_stack.start(fresh=True)
    local_stack.start_gateway(fresh=True)
    project = project_copy(REPO, tmp_path_factory.mktemp("project"))
    env = {**os.environ, "PULUMI_BACKEND_URL": f"file://{tmp_path_factory.mktemp('state')}",
           "PULUMI_SKIP_CONFIRMATIONS": "true", **upstream_source_env()}
    yield project, env
    subprocess.run(["bash", "-c", "source scripts/env.sh && pulumi destroy --yes --stack local"
                    " --non-interactive"], cwd=project, env=env, capture_output=True, check=False)
    local_stack.stop(discard=True)
    local_stack.stop(local_stack.GATEWAY_HOST, discard=True)


def run_block(local: tuple[Path, dict[str, str]], block: str, *, env_sh: bool = True,
              timeout: float = 1800) -> subprocess.CompletedProcess:
    """One README block as written, stopping at its first failed line."""
    project, env = local
    script = "set -euo pipefail\n" + ("source scripts/env.sh\n" if env_sh else "") + block
    return subprocess.run(["bash", "-c", script], cwd=project, env=env, capture_output=True,
                          text=True, timeout=timeout)


def stack_output(local: tuple[Path, dict[str, str]], name: str) -> dict:
    return json.loads(run_block(local, f"pulumi stack output --stack local --json {name}").stdout)


def alert_state(server: Prometheus, name: str) -> str | None:
    return (server.alerts().get(name) or {}).get("state")


def spend_on_the_hatch(usd: float) -> None:
    """What the hook's ledger records for one escalation of `usd` (admit, escalate, settle),
    in the local gateway's database (its URL is on the gateway host's disk)."""
    root = host_status(local_stack.GATEWAY_HOST).root_dir
    env = (root / "opt/spear-gateway/config/database.env").read_text()
    url = re.search(r'DATABASE_URL="([^"]+)"', env)[1]
    store = PgStore(url, hatch_cap_usd=20.0)
    try:
        request = f"alert-test-{uuid.uuid4().hex}"
        assert store.admit("alert-test-key", request, worst_usd=usd, budget_usd=None) == "fleet"
        assert store.escalate(request, 503, usd, month=this_month()) == "hatch"
        store.settle(request, 0.0, usd)
    finally:
        store.close()


def prometheus_scrapes_both_and_fires_the_hatch_alert() -> None:
    server = Prometheus(PROMETHEUS_PORT)

    def targets_up():
        targets = server.api("targets")["activeTargets"]
        jobs = [t["labels"]["job"] for t in targets if t["health"] == "up"]
        return (jobs.count("vllm-fleet"), jobs.count("spear-gateway")), targets

    assert wait_until(lambda: targets_up()[0] == (2, 1), 60), targets_up()
    targets = targets_up()[1]
    assert {t["labels"].get("track") for t in targets if t["labels"]["job"] == "vllm-fleet"} == {"stable"}
    [group] = [g for g in server.api("rules")["groups"] if g["name"] == alerts.GROUP]
    assert all(rule["health"] == "ok" for rule in group["rules"]), group
    # The smoke tests' requests as the pods count them, and every developer's budget as the
    # gateway's exporter reads it from the ledger (within a few scrapes).
    assert wait_until(lambda: (server.value(
        'sum(vllm:request_success_total{model_name="qwen3-coder-next"})') or 0) >= 3, 30)
    assert wait_until(lambda: server.value("count(spear_developer_budget_usd)") == 5, 30), \
        server.api("query", query="spear_developer_budget_usd")
    assert alert_state(server, "HatchSpendNearCap") is None
    spend_on_the_hatch(16.0)  # over the local stack's alert at 15 USD, under its cap
    assert wait_until(lambda: alert_state(server, "HatchSpendNearCap") == "firing", 60), \
        server.alerts()
    assert server.value(f"max({alerts.HATCH_SPEND})") == 16.0


def fleet_state(cluster) -> str:
    """What a failed up-local leaves to explain it: the fleet's pods (ready, restarts, IP), its
    Services' endpoints as kube-proxy sees them, and the kubelet's last failed probes."""
    client = cluster.client()
    pods = (client.get(f"/api/v1/namespaces/{FLEET_NAMESPACE}/pods") or {}).get("items", [])
    lines = [f"pod {p['metadata']['name']}: {p['status'].get('phase')} ready="
             + ",".join(f"{c['name']}:{c['ready']}/{c['restartCount']} restarts"
                        for c in p["status"].get("containerStatuses") or [])
             + f" ip={p['status'].get('podIP')}" for p in pods]
    slices = (client.get(f"/apis/discovery.k8s.io/v1/namespaces/{FLEET_NAMESPACE}/endpointslices")
              or {}).get("items", [])
    lines += [f"endpoints of {s['metadata'].get('labels', {}).get('kubernetes.io/service-name')}: "
              + ", ".join(f"{a}{'' if e.get('conditions', {}).get('ready') else ' (not ready)'}"
                          for e in s.get("endpoints") or [] for a in e.get("addresses", []))
              for s in slices]
    kubelet = cluster.state_dir / "logs" / "kubelet.log"
    probes = [l for l in kubelet.read_text(errors="replace").splitlines() if "Probe failed" in l
              and f'pod="{FLEET_NAMESPACE}/vllm-' in l] if kubelet.exists() else []
    return "\n".join(["the fleet after the failed up:", *lines, *probes[-10:]])


def test_up_local_brings_up_the_whole_local_fleet_and_prints_every_smoke_test(local, kube_cluster):
    # A newcomer runs it before sourcing anything.
    first = run_block(local, UP_LOCAL, env_sh=False, timeout=3600)
    assert first.returncode == 0, (first.stdout[-4000:] + first.stderr[-4000:] + "\n"
                                   + fleet_state(kube_cluster))
    assert ends_with_the_report(first.stdout), first.stdout[-4000:]
    the_gateway_serves_https_by_name_beyond_loopback_and_plain_http_only_on_it(local)
    prometheus_scrapes_both_and_fires_the_hatch_alert()
    # Nothing drifts. A second up-local would also rerun the proofs above (the seats' turns are
    # most of its 90 s, docs/BENCHMARKS.md): on the cluster tests' path, they would show nothing new.
    again = run_block(local, "pulumi preview --refresh --expect-no-changes --stack local")
    assert again.returncode == 0, again.stdout[-4000:] + again.stderr[-4000:]


def the_gateway_serves_https_by_name_beyond_loopback_and_plain_http_only_on_it(local) -> None:
    gateway = stack_output(local, "gateway")
    address, port = gateway["tls"]["address"], 4443
    context = ssl.create_default_context(cadata=gateway["tls"]["root"])
    # By its name, at the listener's address (this machine has no DNS entry for it).
    with socket.create_connection((address, port), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname=gateway["tls"]["name"]) as conn:
        conn.sendall(b"GET /health/liveliness HTTP/1.1\r\nHost: gateway.spear.internal\r\n"
                     b"Connection: close\r\n\r\n")
        assert conn.recv(64).startswith(b"HTTP/1.1 200"), "no HTTPS answer by name"
    # Plain HTTP gets no HTTP answer there, and the loopback port is not on that address.
    with socket.create_connection((address, port), timeout=10) as conn:
        conn.sendall(b"GET /health/liveliness HTTP/1.1\r\nHost: x\r\n\r\n")
        assert not conn.recv(64).startswith(b"HTTP/1.1 200")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((address, 4000), timeout=10).close()


def test_a_seats_harness_answers_through_the_gateway_by_name_over_tls_as_the_readme_says(local):
    turn = run_block(local, SEAT_TURN)
    assert turn.returncode == 0, turn.stdout[-4000:] + turn.stderr[-4000:]
    assert re.fullmatch(seat_proof("ana"), turn.stdout.strip()), turn.stdout


def test_a_seats_harness_edits_a_repository_and_the_gateway_counts_the_accepted_edit(local):
    edit = run_block(local, SEAT_EDIT)
    assert edit.returncode == 0, edit.stdout[-4000:] + edit.stderr[-4000:]
    lines = edit.stdout.splitlines()
    assert lines[0] == ("seat cyn: claude-code 2.1.328 changed /workspace/demo with cyn's key"
                        f" through {GATEWAY_URL}:"), edit.stdout
    # git's diff of the file the real harness wrote through its Write tool.
    assert "diff --git a/hello.py b/hello.py" in lines and "new file mode 100644" in lines
    assert "+print('hello from the fleet')" in lines, edit.stdout
    # Claude Code reported the decision to the gateway over TLS; Prometheus scraped it.
    server = Prometheus(PROMETHEUS_PORT)
    accepted = ('sum(spear_edit_decisions_total{developer="cyn",harness="claude-code",'
                'tool="Write",decision="accept"})')
    assert wait_until(lambda: (server.value(accepted) or 0) >= 1, 60), \
        server.api("query", query="spear_edit_decisions_total")


def developer_keys(local: tuple[Path, dict[str, str]]) -> dict[str, str]:
    harnesses = json.loads(run_block(local, "pulumi stack output --stack local --json --show-secrets"
                                            " harnesses").stdout)
    return {dev: developer_key(wiring) for dev, wiring in harnesses.items()}


def the_gate_record_is_what_the_gateway_signed(local: tuple[Path, dict[str, str]]) -> None:
    """What scripts/gate wrote, as the stack will judge it: the paired eval's tasks, neutral (the
    canary serves the same model), 100 live tool calls, LiteLLM's version as the gateway says
    it; the CI keys' owners and never the keys; which track and what pair answered each side as
    the gateway signed it; the gateway's TTFT beside the client's. Moved to another pair with its
    evidence's run line, the receipts refuse it."""
    project, _ = local
    [record_file] = (project / RECORDS).glob("*.json")
    record = json.loads(record_file.read_text())
    paired = record["results"]["pairedEval"]
    assert (paired["tasks"], paired["b"], paired["c"]) == (14, 0, 0)
    assert record["results"]["toolCalls"]["passed"] == 100
    assert record["pin"]["gatewayVersion"] == stack_output(local, "gateway")["litellm_version"]
    evidence = (project / RECORDS / record["evidence"]["file"]).read_text()
    lines = [json.loads(line) for line in evidence.splitlines()]
    assert (lines[0]["stable"], lines[0]["candidate"]) == ("coder as gate", "coder as gate-pilot")
    assert all(key not in evidence for key in developer_keys(local).values())
    # The track and the pair of the pod that answered, read off the pods by the gateway: "" for
    # requests sent before its first listing of the canary's pods, which the Service placed.
    signed = {(line.get("track", "candidate"), line["receipt"]["track"], line["receipt"]["serves"])
              for line in lines[1:]}
    pairs = {side: receipts.serving(pair["tag"], pair["model"], pair["revision"])
             for side, pair in (("stable", STABLE_PAIR), ("candidate", CANARY_PAIR))}
    tracks = {"stable": "stable", "candidate": "canary"}
    assert {(side, tracks[side], pair) for side, pair in pairs.items()} <= signed <= {
        (side, tracks[side], serves) for side, pair in pairs.items() for serves in (pair, "")}
    latency = record["results"]["latency"]
    assert 0 < latency["gatewayTtftP95"] <= latency["ttftP95"] + rollout_gate.CLOCK_SLACK_SECONDS
    master_key = run_block(local, "pulumi config get --stack local gatewayMasterKey").stdout.strip()
    key = receipts.receipt_key(master_key)
    tasks = rollout_gate.parse_tasks((project / "gate/tasks/local.jsonl").read_bytes())[0]
    assert rollout_gate.receipt_problems(evidence.encode(), tasks, key,
                                         rollout_gate.pin_from_json(record["pin"])) == []
    lines[0]["pin"]["engineVersion"] = "v0.25.1"
    problems = rollout_gate.receipt_problems(rollout_gate.evidence_bytes(lines), tasks, key,
                                             rollout_gate.pin_from_json(lines[0]["pin"]))
    assert [p for p in problems if p.startswith("pin: the record pins v0.25.1")], problems


def stable_pair(local: tuple[Path, dict[str, str]]) -> tuple[str, str]:
    stable = stack_output(local, "vllm_fleet")["stable"]
    return stable["image"].rsplit(":", 1)[1], stable["revision"]


def test_the_readmes_rollout_runs_as_written_canary_gate_promotion_and_rollback(local, kube_cluster):
    client = kube_cluster.client()
    canary = run_block(local, CANARY)
    assert canary.returncode == 0, canary.stdout[-4000:] + canary.stderr[-4000:]
    # The gate judged its record as the stack will: PASS is a promotion the stack accepts.
    assert "verdict: PASS" in canary.stdout, canary.stdout[-4000:] + canary.stderr[-2000:]
    the_gate_record_is_what_the_gateway_signed(local)
    # The record measured the pair under codex 0.169.0: promoting it beside a bump is refused
    # at preview, naming the member that moved.
    stack_file = local[0] / "stacks" / "Pulumi.local.yaml"
    declared = stack_file.read_bytes()
    try:
        moved = run_block(local, TUPLE_MOVED)
    finally:
        stack_file.write_bytes(declared)
    assert moved.returncode != 0
    assert "measured the pair under another tuple (pin.harnessVersions.codex: 0.169.0, where" \
        " the stack pins 0.170.0)" in moved.stdout + moved.stderr, \
        moved.stdout[-4000:] + moved.stderr[-2000:]
    # The bump on its own: the seat image up-local built holds codex 0.169.0, as its tag says,
    # so the preview refuses it before any resource exists, naming the tag the bump needs.
    try:
        bumped = run_block(local, HARNESS_BUMPED)
    finally:
        stack_file.write_bytes(declared)
    assert bumped.returncode != 0
    assert "vllmFleet.agentSandbox.seatImage" in bumped.stdout + bumped.stderr
    assert (f"names other harness versions than these, whose image is tagged"
            f" {seat_image_tag({**local_stack.harness_versions(), CODEX: '0.170.0'})}") \
        in bumped.stdout + bumped.stderr, bumped.stdout[-4000:] + bumped.stderr[-2000:]
    before = stack_output(local, "gateway")["fleet_routes"]["stable"]["throughput"]
    promote = run_block(local, PROMOTE)
    assert promote.returncode == 0, (promote.stdout[-4000:] + promote.stderr[-4000:] + "\n"
                                     + fleet_state(kube_cluster))
    assert stable_pair(local) == ("v0.25.0", CANARY_PAIR["revision"])
    assert fleet.serving(client, FLEET_NAMESPACE, "stable") == (
        f"{STANDIN}:v0.25.0", CANARY_PAIR["model"], CANARY_PAIR["revision"])
    assert fleet.available(client, FLEET_NAMESPACE, "stable", 2)
    assert fleet.deployment(client, FLEET_NAMESPACE, "canary") is None
    # The pilot ring is back on stable, beside the inference host `local` (its route).
    keys = developer_keys(local)
    assert {route for route, _ in fleet.served_by(LOOPBACK_GATEWAY, keys["gate-pilot"], 4)} \
        <= {"local", "vllm-stable"}
    # The engine changed: the track's throughput was measured again and set beside the last.
    after = stack_output(local, "gateway")["fleet_routes"]["stable"]["throughput"]
    assert after["previous"] == {rate: before[rate] for rate in throughput.RATES}
    assert after["ratios"] == throughput.compared(after, before)
    rollback = run_block(local, ROLLBACK)
    assert rollback.returncode == 0, rollback.stdout[-4000:] + rollback.stderr[-4000:]
    assert stable_pair(local) == ("v0.24.0", STABLE_PAIR["revision"])
    assert fleet.serving(client, FLEET_NAMESPACE, "stable") == (
        f"{STANDIN}:v0.24.0", STABLE_PAIR["model"], STABLE_PAIR["revision"])
    assert fleet.available(client, FLEET_NAMESPACE, "stable", 2)
    assert {route for route, _ in fleet.served_by(LOOPBACK_GATEWAY, keys["cyn"], 2)} == {"vllm-stable"}
