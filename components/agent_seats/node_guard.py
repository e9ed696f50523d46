"""The node guard: what keeps an agent seat off its own node. It runs on every node (a DaemonSet
on the node's network, components/agent_seats/manifests.py) and filters, in the node's nftables,
what the agent namespace's pods on that node send: to the gateway's address and port and the
declared mirrors, and nothing else, the node's own addresses included.

Why home-made: NetworkPolicy never judges a pod's traffic to its own node (the node's INPUT hook:
"traffic to and from the node where a Pod is running is always allowed"), so the kubelet, every
host port, an API server or a metadata address on the node answer a seat whatever the
namespace's policies say. The guard's table hooks INPUT and FORWARD and matches a packet by its
sender's address, one of the seats' (listed from the API server for this node); a connection
to a Service is judged by the address it was sent to (conntrack's original destination), so the
gateway's Service IP is allowed and the pod behind it is reached. What is refused is rejected
(ICMP admin-prohibited), so a seat's connect fails at once with "No route to host".

Fail-closed: a seat's pod waits in its first init container until this guard has written its
address into the table and then annotated the pod (`spear-fleet/node-guard: <its addresses,
comma-separated>`, read through the downward API), so no harness runs unfiltered. A guard that
cannot reach the API server keeps the last table. Stopped (SIGTERM), it waits up to
LEAVE_SECONDS for the node's seats to be gone and only then removes its table: a guard replaced
while seats run leaves their filter in place for the next one, and a stack's destroy (seats
first, then the guard) leaves nothing on the node that could catch a later pod given a seat's
old address.

Standard library only and this one file, shipped in a ConfigMap: any image with python3 and nft
(Debian's python3 and nftables) runs it. `python3 node_guard.py CONFIG_JSON`, its node's name in NODE_NAME: {"namespace",
"allow": [{"cidr", "ports"}], "interval", "api_server" (null: the cluster's `kubernetes`
Service)}.
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from typing import Any

ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
# spear.seats.NODE_GUARD_TABLE and NODE_GUARD: not imported, this file runs alone in the pod.
TABLE = "spear-seat-guard"
ANNOTATION = "spear-fleet/node-guard"
# Before the NAT tables' input and kube-proxy's filter chains see a seat's packet.
PRIORITY = -10
LEAVE_SECONDS = 20  # within the DaemonSet's termination grace (manifests.py)


# A finished pod's address goes back to the node's pool while the API still shows it: filtering
# it would catch the next pod given that address, whatever its namespace.
FINISHED = ("Succeeded", "Failed")


def seat_addresses(pods: dict[str, Any]) -> set[str]:
    """The addresses of an API PodList's pods that can still send (a pod on the node's network has
    none of its own; a finished one, none any more)."""
    return {ip["ip"] for pod in pods.get("items", [])
            if not (pod.get("spec") or {}).get("hostNetwork")
            and (pod.get("status") or {}).get("phase") not in FINISHED
            for ip in (pod.get("status") or {}).get("podIPs") or []}


def _allow_rules(allow: list[dict[str, Any]]) -> list[str]:
    rules = []
    for target in allow:
        network = ipaddress.ip_network(target["cidr"])
        family = "ip" if network.version == 4 else "ip6"
        ports = ", ".join(str(port) for port in target["ports"])
        rules.append(f"ct original {family} daddr {network} meta l4proto tcp"
                     f" ct original proto-dst {{ {ports} }} accept")
    return rules


def ruleset(seats: set[str], allow: list[dict[str, Any]]) -> str:
    """The whole table, replaced in one nft transaction (added first, so deleting it never fails
    on a node that has none)."""
    by_family: dict[int, list[str]] = {4: [], 6: []}
    for address in sorted(seats):
        by_family[ipaddress.ip_address(address).version].append(address)

    def elements(family: int) -> str:
        return f" elements = {{ {', '.join(by_family[family])} }};" if by_family[family] else ""

    verdicts = "\n".join(f"    {rule}" for rule in _allow_rules(allow))
    hooks = "\n".join(
        f"  chain {hook} {{\n    type filter hook {hook} priority {PRIORITY}; policy accept;\n"
        f"    ip saddr @seats4 jump seat\n    ip6 saddr @seats6 jump seat\n  }}"
        for hook in ("input", "forward"))
    return (f"add table inet {TABLE}\ndelete table inet {TABLE}\n"
            f"table inet {TABLE} {{\n"
            f"  set seats4 {{ type ipv4_addr;{elements(4)} }}\n"
            f"  set seats6 {{ type ipv6_addr;{elements(6)} }}\n"
            f"  chain seat {{\n    ct state established,related accept\n{verdicts}\n"
            f"    reject with icmpx type admin-prohibited\n  }}\n{hooks}\n}}\n")


class Api:
    """The API server as the pod's ServiceAccount reaches it (in-cluster config)."""

    def __init__(self, base: str | None) -> None:
        self.base = base or (f"https://{os.environ['KUBERNETES_SERVICE_HOST']}:"
                             f"{os.environ['KUBERNETES_SERVICE_PORT']}")
        self.tls = ssl.create_default_context(cafile=f"{ACCOUNT}/ca.crt")

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        with open(f"{ACCOUNT}/token") as handle:  # re-read: the kubelet rotates it
            token = handle.read().strip()
        headers = {"Authorization": f"Bearer {token}"}
        if body is not None:
            headers["Content-Type"] = "application/merge-patch+json"
        request = urllib.request.Request(f"{self.base}{path}", method=method, headers=headers,
                                         data=None if body is None else json.dumps(body).encode())
        with urllib.request.urlopen(request, context=self.tls, timeout=10) as answer:
            return json.load(answer)

    def pods(self, namespace: str, node: str) -> dict[str, Any]:
        query = urllib.parse.urlencode({"fieldSelector": f"spec.nodeName={node}"})
        return self._call("GET", f"/api/v1/namespaces/{namespace}/pods?{query}")

    def vouch(self, namespace: str, pod: str, addresses: str) -> None:
        self._call("PATCH", f"/api/v1/namespaces/{namespace}/pods/{pod}",
                   {"metadata": {"annotations": {ANNOTATION: addresses}}})


def vouched(pods: dict[str, Any], guarded: set[str]) -> list[tuple[str, str]]:
    """(pod, its addresses) of each pod the table now guards whose annotation does not say so."""
    due = []
    for pod in pods.get("items", []):
        meta = pod.get("metadata") or {}
        addresses = [ip["ip"] for ip in (pod.get("status") or {}).get("podIPs") or []]
        text = ",".join(addresses)  # as the downward API's status.podIPs says them
        if addresses and set(addresses) <= guarded and (meta.get("annotations") or {}).get(ANNOTATION) != text:
            due.append((meta["name"], text))
    return due


def leave(api: Api, namespace: str, node: str) -> None:
    """On SIGTERM: the table goes once no seat runs on the node (else it stays, for the next
    guard, whose seats' init containers wait for it anyway)."""
    deadline = time.monotonic() + LEAVE_SECONDS
    while time.monotonic() < deadline:
        try:
            if not seat_addresses(api.pods(namespace, node)):
                subprocess.run(["nft", "delete", "table", "inet", TABLE], capture_output=True)
                print("node_guard: no seat left on the node: table removed", flush=True)
                return
        except OSError as err:
            print(f"node_guard: {err}", file=sys.stderr, flush=True)
        time.sleep(1)
    print("node_guard: seats still on the node: table kept", flush=True)


def main(argv: list[str]) -> int:
    with open(argv[1]) as handle:
        config = json.load(handle)
    api, node = Api(config.get("api_server")), os.environ["NODE_NAME"]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        guard(api, config, node)
    finally:
        leave(api, config["namespace"], node)
    return 0


def guard(api: Api, config: dict[str, Any], node: str) -> None:
    applied: set[str] | None = None
    while True:
        try:
            pods = api.pods(config["namespace"], node)
            seats = seat_addresses(pods)
            if seats != applied:
                subprocess.run(["nft", "-f", "-"], input=ruleset(seats, config["allow"]),
                               text=True, check=True, capture_output=True)
                applied = seats
                print(f"node_guard: {len(seats)} seat address(es) guarded", flush=True)
            for pod, addresses in vouched(pods, applied or set()):
                api.vouch(config["namespace"], pod, addresses)
        except (OSError, subprocess.CalledProcessError) as err:
            detail = getattr(err, "stderr", "") or ""
            print(f"node_guard: {err} {detail}".strip(), file=sys.stderr, flush=True)
        time.sleep(config["interval"])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
