"""What prefix-affinity routing buys on the local fleet (gateway.coder.fleetRouting): one agent
trace replayed twice in one run against the local stack's stable track (two replicas of the
serving image), once spread by the track's Service (kube-proxy's random pick, what the gateway
did before) and once through the gateway picking the pod by prefix affinity.

The trace: TENANTS tenants (the local stack's stable-ring keys, cyn of research and gate of ci),
--sessions conversations each, run at once, --turns turns each; every conversation starts with
its tenant's system prompt (a map of the tenant's repository) and its own task, and each turn
repeats the one before with the answer and the tool result it brought back (RESULT_LINES lines),
as an agent's does. Each phase's prompts start with the
phase's own nonce, so neither reuses the other's cache.

Prints, per phase: the prompt tokens the pods served from their prefix cache out of those asked
(the pods' vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total, which the serving
image reads off llama-server's timings.cache_n), TTFT p50/p95 as the client sees it (streamed),
and the ratios affinity / spread: of the cached share, of the prompt tokens computed again (the
misses, what prefill costs) and of TTFT p95. The spread phase goes straight to the Service (no gateway hop,
which only flatters its TTFT). Needs `scripts/up-local` first. Numbers, not a test:
`scripts/bench-routing [--sessions N] [--turns N] [--pods N]`.

`--pods N` runs on N stable pods: the stable Deployment is scaled to N through its scale
subresource for the run and back afterwards, and the run's own entry is then taken out of the
Deployment's managed fields, so the stack's next server-side apply owns `replicas` alone again
(an `up` would otherwise meet a field conflict).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

from components.hostops.waiting import wait_until
from components.vllm_fleet.manifests import deployment_name
from gate.run import Endpoint
from localhosts.kube.kubecluster import KubeClient
from spear.fleet import STABLE
from spear.harness import developer_key
from spear.rollout_gate import percentile
from spear.rules import CODER_MODEL

STACK = "local"
TENANTS = ("cyn", "gate")  # the stable ring: served by the fleet's stable track alone
KUBECONFIG = Path.home() / ".cache" / "spear-fleet" / "kubecluster" / "local" / "kubeconfig"
# What each turn brings back, as an agent's tool results do (a file read, a test run): lines.
RESULT_LINES = 40


def repository_map(tenant: str) -> str:
    """The tenant's own repository (each team works on its own), in the system prompt."""
    return "\n".join(f"{tenant}/src/module_{i}.py: def handler_{i}(request): parses and validates"
                     f" field {i} of the request" for i in range(60))


def tool_result(task: str, turn: int) -> str:
    return "\n".join(f"{task} step {turn} line {i}: assert parse(field_{i}) == expected_{i}"
                     for i in range(RESULT_LINES))


def pulumi(*args: str) -> dict:
    done = subprocess.run(["pulumi", *args, "--json", "--stack", STACK], capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout)


def stable_pods(client: KubeClient, namespace: str) -> list[str]:
    """The stable track's ready pods' addresses."""
    pods = client.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector=app%3Dvllm%2Ctrack%3Dstable")
    return [p["status"]["podIP"] for p in pods["items"]
            if p["metadata"].get("deletionTimestamp") is None
            and any(c["type"] == "Ready" and c["status"] == "True"
                    for c in p["status"].get("conditions") or [])]


MANAGER = "bench-routing"
# The gateway lists the track's pods every spear_gateway/pods.py POLL_SECONDS (1 s): a few
# listings after the last pod is ready, it routes to all of them.
LISTED_SECONDS = 5


@contextlib.contextmanager
def scaled(client: KubeClient, namespace: str, pods: int | None) -> Iterator[list[str]]:
    """The stable track's ready pods, `pods` of them for the run when given (see the module's
    docstring), back to the Deployment's own count after it."""
    deployment = f"/apis/apps/v1/namespaces/{namespace}/deployments/{deployment_name(STABLE)}"
    declared = client.get(deployment)["spec"]["replicas"]
    if pods is None or pods == declared:
        yield stable_pods(client, namespace)
        return

    def scale(replicas: int) -> None:
        status, body = client.request(
            "PATCH", f"{deployment}/scale?fieldManager={MANAGER}",
            [{"op": "replace", "path": "/spec/replicas", "value": replicas}],
            content_type="application/json-patch+json")
        if status != 200:
            raise SystemExit(f"bench-routing: scaling the stable track: HTTP {status} {body}")

    scale(pods)
    try:
        if not wait_until(lambda: len(stable_pods(client, namespace)) == pods, 600, 2):
            raise SystemExit(f"bench-routing: the stable track did not reach {pods} ready pods")
        time.sleep(LISTED_SECONDS)
        yield stable_pods(client, namespace)
    finally:
        scale(declared)
        fields = client.get(deployment)["metadata"]["managedFields"]
        client.patch(deployment, [{"op": "replace", "path": "/metadata/managedFields",
                                   "value": [f for f in fields if f.get("manager") != MANAGER]}])


def cache_counters(pods: list[str], port: int) -> tuple[float, float]:
    """(hits, queries) summed over the pods' /metrics."""
    hits = queries = 0.0
    for pod in pods:
        with urllib.request.urlopen(f"http://{pod}:{port}/metrics", timeout=10) as answer:
            for line in answer.read().decode().splitlines():
                name, _, value = line.partition(" ")
                if name.startswith("vllm:prefix_cache_hits_total"):
                    hits += float(value)
                elif name.startswith("vllm:prefix_cache_queries_total"):
                    queries += float(value)
    return hits, queries


def conversation(nonce: str, tenant: str, task: str, turns: int) -> list[list[dict[str, str]]]:
    """Each turn's messages: the system prompt with the tenant's repository, the task, and every
    turn since, each with the tool result it brought back."""
    messages = [{"role": "system", "content": f"[{nonce}] You are a coding agent. The repository:"
                                              f"\n{repository_map(tenant)}"},
                {"role": "user", "content": task}]
    out = []
    for i in range(turns):
        out.append(list(messages))
        messages += [{"role": "assistant", "content": f"Running step {i + 1} of {task}."},
                     {"role": "user", "content": tool_result(task, i + 1)}]
    return out


def phase(endpoints: dict[str, Endpoint], model: str, sessions: int, turns: int) -> list[float]:
    """Every tenant's conversations at once, each turn after the one before: each turn's TTFT."""
    nonce = uuid.uuid4().hex

    def converse(tenant: str, i: int) -> list[float]:
        ttfts = []
        for messages in conversation(nonce, tenant, f"task {i} of {tenant}", turns):
            status, chunks, text, *_ = endpoints[tenant].stream(
                {"model": model, "messages": messages, "max_tokens": 16})
            if status != 200 or not chunks:
                raise SystemExit(f"bench-routing: {tenant}'s turn failed: HTTP {status} {text}")
            ttfts.append(chunks[0])
        return ttfts

    with concurrent.futures.ThreadPoolExecutor(len(endpoints) * sessions) as pool:
        runs = [pool.submit(converse, tenant, i) for tenant in endpoints for i in range(sessions)]
        return [t for run in runs for t in run.result()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench-routing", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=3, help="conversations per tenant")
    parser.add_argument("--turns", type=int, default=6, help="turns per conversation")
    parser.add_argument("--pods", type=int, help="stable pods to run on (default: as deployed)")
    args = parser.parse_args(argv)
    if args.pods is not None and args.pods < 2:
        parser.error(f"--pods {args.pods}: two or more stable pods are needed")
    config = pulumi("config", "--show-secrets")
    routing = config["spear-fleet:gateway"]["objectValue"]["coder"].get("fleetRouting")
    if routing not in (None, "prefix-affinity"):
        raise SystemExit(f"bench-routing: the local stack's gateway.coder.fleetRouting is {routing}")
    vllm_key = config["spear-fleet:vllmApiKey"]["value"]
    fleet = pulumi("stack", "output", "vllm_fleet")
    listen = config["spear-fleet:gateway"]["objectValue"]["listen"]
    harnesses = pulumi("stack", "output", "harnesses", "--show-secrets")
    namespace, service = fleet["namespace"], fleet["cluster_ips"]["stable"]
    port = int(fleet["endpoints"]["stable"].rsplit(":", 1)[1].split("/")[0])
    keys = {t: developer_key(harnesses[t]) for t in TENANTS}
    ways = {
        "spread (the Service)": ({t: Endpoint(f"http://{service}:{port}", vllm_key) for t in TENANTS},
                                 fleet["served_model_name"]),
        # On the gateway host's loopback listener (plain HTTP), as its own checks ask.
        "affinity (the gateway)": ({t: Endpoint(f"http://{listen['host']}:{listen['port']}", keys[t])
                                    for t in TENANTS}, CODER_MODEL),
    }
    with scaled(KubeClient(KUBECONFIG), namespace, args.pods) as pods:
        if len(pods) < 2:
            raise SystemExit(f"bench-routing: the stable track has {len(pods)} ready pod(s);"
                             " two or more are needed")
        bench(ways, pods, port, args.sessions, args.turns)
    return 0


def bench(ways: dict[str, tuple[dict[str, Endpoint], str]], pods: list[str], port: int,
          sessions: int, turns: int) -> None:
    """Each way's phase on the pods, and the ratios."""
    print(f"{len(TENANTS)} tenants x {sessions} conversations x {turns} turns, on"
          f" {len(pods)} stable pods")
    results = {}
    for name, (endpoints, model) in ways.items():
        before = cache_counters(pods, port)
        ttfts = phase(endpoints, model, sessions, turns)
        after = cache_counters(pods, port)
        hits, queries = after[0] - before[0], after[1] - before[1]
        results[name] = (hits / queries if queries else 0.0, percentile(ttfts, 50),
                         percentile(ttfts, 95), queries - hits)
        print(f"{name:24} cached {hits:.0f}/{queries:.0f} prompt tokens ({results[name][0]:.1%}),"
              f" TTFT p50 {results[name][1] * 1000:.0f} ms p95 {results[name][2] * 1000:.0f} ms")
    spread, near = results.values()
    # Prefill is paid on what the cache missed: the recomputed tokens are the cost routing moves.
    print(f"affinity / spread: cached share x{near[0] / spread[0] if spread[0] else float('inf'):.2f},"
          f" prompt tokens computed again x{near[3] / spread[3] if spread[3] else float('inf'):.2f},"
          f" TTFT p95 x{near[2] / spread[2]:.2f}")


if __name__ == "__main__":
    sys.exit(main())
