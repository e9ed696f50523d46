"""The bundled Prometheus's pod discovery: a sidecar that lists the pods of each scrape job from
the Kubernetes API and writes them as Prometheus file_sd target files, which Prometheus watches.

Why home-made: Debian builds Prometheus without its Kubernetes discovery (its patch "Disable
kubernetes SD, until dependencies are more reasonable"), and file_sd is what Prometheus offers
for discovery it does not have. Standard library only, so any image with python3 runs it; the
component ships this file in the server's ConfigMap.

`python3 pod_discovery.py JOBS_JSON OUT_DIR`: JOBS_JSON is {"interval": seconds, "jobs": {job:
{"namespace", "selector" (a label selector), "port" (a container port's name)}}, "api_server":
its URL, or null for the cluster's `kubernetes` Service}. Each round
writes OUT_DIR/<job>.json (atomically: Prometheus never reads half a file): every running pod
with an IP and that port, labelled with its namespace, name and track. A round the API does not
answer keeps the last files, so a restart of the API server does not drop the targets.
"""

from __future__ import annotations

import json
import os
import ssl
import sys
import time
import urllib.parse
import urllib.request
from typing import Any

ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
TRACK = "track"  # spear.fleet.TRACK: not imported, this file runs alone in the pod


def targets(pods: dict[str, Any], port: str) -> list[dict[str, Any]]:
    """file_sd groups for a pod list (the API's PodList): one per running pod exposing `port`."""
    found = []
    for pod in pods.get("items", []):
        status, meta = pod.get("status") or {}, pod.get("metadata") or {}
        if status.get("phase") != "Running" or not status.get("podIP"):
            continue
        numbers = [p["containerPort"] for c in (pod.get("spec") or {}).get("containers", [])
                   for p in c.get("ports", []) if p.get("name") == port]
        if not numbers:
            continue
        labels = {"namespace": meta.get("namespace", ""), "pod": meta.get("name", "")}
        if TRACK in (meta.get("labels") or {}):
            labels[TRACK] = meta["labels"][TRACK]
        found.append({"targets": [f"{status['podIP']}:{numbers[0]}"], "labels": labels})
    return sorted(found, key=lambda group: group["labels"]["pod"])


def write(path: str, groups: list[dict[str, Any]]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as out:
        json.dump(groups, out)
    os.replace(tmp, path)


class Api:
    """The API server as the pod's ServiceAccount reaches it (in-cluster config)."""

    def __init__(self, base: str | None) -> None:
        # The `kubernetes` Service unless the stack names the API server (vllmFleet
        # .observability.prometheus.apiServer); the ServiceAccount's CA checks either.
        self.base = base or (f"https://{os.environ['KUBERNETES_SERVICE_HOST']}:"
                             f"{os.environ['KUBERNETES_SERVICE_PORT']}")
        self.tls = ssl.create_default_context(cafile=f"{ACCOUNT}/ca.crt")

    def pods(self, namespace: str, selector: str) -> dict[str, Any]:
        with open(f"{ACCOUNT}/token") as handle:  # re-read: the kubelet rotates it
            token = handle.read().strip()
        query = urllib.parse.urlencode({"labelSelector": selector})
        request = urllib.request.Request(
            f"{self.base}/api/v1/namespaces/{namespace}/pods?{query}",
            headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, context=self.tls, timeout=10) as answer:
            return json.load(answer)


def main(argv: list[str]) -> int:
    with open(argv[1]) as handle:
        config = json.load(handle)
    out, api = argv[2], Api(config.get("api_server"))
    while True:
        for job, spec in config["jobs"].items():
            try:
                pods = api.pods(spec["namespace"], spec["selector"])
            except OSError as err:
                print(f"pod_discovery: {job}: {err}", file=sys.stderr, flush=True)
                continue
            write(os.path.join(out, f"{job}.json"), targets(pods, spec["port"]))
        time.sleep(config["interval"])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
