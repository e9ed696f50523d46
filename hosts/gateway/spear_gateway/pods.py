"""The fleet tracks' ready pods, for prefix-affinity routing (gateway.coder.fleetRouting; the
pick is spear/affinity.py).

A track's deployment in config.yaml names its Service in `model_info.spear_pods` ({namespace,
service, port}). The pods behind it come from the Service's EndpointSlices, listed from the API
server with a token that may only read those (components/vllm_fleet/manifests.py
router_access), every POLL_SECONDS in a thread of its own: an endpoint whose `ready` condition is
false (failing its readiness probe, or terminating) is out at the next listing, well inside the
pods' preStop drain. A pod the gateway could not connect to is out at once, for
QUARANTINE_SECONDS (until its readiness probe would have taken it out), and the next try picks
again. Standard library only: urllib and ssl, as pod_discovery.py does.

The same listing reads what each of the fleet's pods runs (its image's tag, and the model and
`--revision` of its `vllm serve` command line, spear/vllm.py): the receipt a gate run's answer
carries signs it (spear_gateway/receipts.py), so a record names the pair that really answered.
It is kept in `RUNNING`, module-level because LiteLLM loads each callback file as a module of
its own and both import this one.

Fail-open to the Service: while no pod of a track is known (the API server never answered, or
the track has none ready), the request keeps the deployment's api_base (the Service's address)
and kube-proxy picks, as with fleetRouting `service`. A listing that fails keeps the last one.
"""

from __future__ import annotations

import base64
import json
import logging
import ssl
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spear import vllm
from spear.affinity import pick
from spear.fleet import APP
from spear.receipts import serving

log = logging.getLogger("spear_gateway")
POLL_SECONDS = 1.0
# A readiness probe takes a pod out after 3 failures 10 s apart (vllm_fleet/manifests.py).
QUARANTINE_SECONDS = 30.0
SERVICE_LABEL = "kubernetes.io/service-name"
PODS_INFO = "spear_pods"  # the deployment's model_info field (components/gateway/render.py)
# Pod IP -> what it runs (receipts.serving), as the last listing saw the fleet's pods.
RUNNING: dict[str, str] = {}


@dataclass(frozen=True)
class Track:
    """A track's Service: where its EndpointSlices are."""
    namespace: str
    service: str
    port: int

    @classmethod
    def of(cls, info: Mapping[str, Any]) -> Track | None:
        where = info.get(PODS_INFO)
        if not isinstance(where, Mapping):
            return None
        return cls(str(where["namespace"]), str(where["service"]), int(where["port"]))


def ready_addresses(slices: Mapping[str, Any], port: int) -> list[str]:
    """`ip:port` of each ready endpoint in an EndpointSliceList (the port its slice gives, else
    the track's)."""
    found = set()
    for item in slices.get("items") or []:
        ports = [p.get("port") for p in item.get("ports") or [] if p.get("port")]
        for endpoint in item.get("endpoints") or []:
            if (endpoint.get("conditions") or {}).get("ready") is False:
                continue
            for address in endpoint.get("addresses") or []:
                found.add(f"{address}:{ports[0] if ports else port}")
    return sorted(found)


def image_tag(image: str) -> str:
    """`v0.24.0` of `registry:5000/vllm/vllm-openai:v0.24.0@sha256:...` ("" without a tag)."""
    name = image.partition("@")[0]
    return name.rpartition(":")[2] if ":" in name.rpartition("/")[2] else ""


def running(pods: Mapping[str, Any]) -> dict[str, str]:
    """Pod IP -> what its `vllm serve` container runs, of a PodList (pods without an IP or
    without that command left out)."""
    found = {}
    for item in pods.get("items") or []:
        address = (item.get("status") or {}).get("podIP")
        for container in (item.get("spec") or {}).get("containers") or []:
            argv = container.get("command") or []
            if address and argv[:2] == ["vllm", "serve"]:
                flags = vllm.flags(argv)
                found[address] = serving(image_tag(container.get("image") or ""),
                                         flags.get("model", ""), flags.get(vllm.REVISION_FLAG, ""))
    return found


def running_at(api_base: Any) -> str:
    """What the pod at `api_base` (`http://ip:port/v1`) runs; "" when it is no pod the last
    listing saw (the Service's address: kube-proxy picked, so nobody here knows which pod)."""
    host = urllib.parse.urlsplit(str(api_base or "")).hostname
    return RUNNING.get(host or "", "")


class FleetApi:
    """The API server, as the router's token reads it (SPEAR_FLEET_API_*)."""

    def __init__(self, server: str, ca_data: str, token: str) -> None:
        self.server, self.token = server.rstrip("/"), token
        self.tls = ssl.create_default_context(cadata=base64.b64decode(ca_data).decode())

    def slices(self, track: Track) -> dict[str, Any]:
        return self._list(f"/apis/discovery.k8s.io/v1/namespaces/{track.namespace}/endpointslices",
                          f"{SERVICE_LABEL}={track.service}")

    def pods(self, namespace: str) -> dict[str, Any]:
        return self._list(f"/api/v1/namespaces/{namespace}/pods", f"app={APP}")

    def _list(self, path: str, selector: str) -> dict[str, Any]:
        query = urllib.parse.urlencode({"labelSelector": selector})
        request = urllib.request.Request(f"{self.server}{path}?{query}",
                                         headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(request, context=self.tls, timeout=5) as answer:
            return json.load(answer)


class PodDirectory:
    """Each track's ready pods (refreshed in the background) and this process's requests in
    flight on each pod, which bound the pick."""

    def __init__(self, api: FleetApi | None) -> None:
        self.api = api
        self._pods: dict[Track, list[str]] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._quarantined: dict[str, float] = {}  # pod -> until (monotonic)
        self._load: dict[str, int] = {}  # pod -> requests in flight through this process
        self._assigned: dict[str, str] = {}  # request id -> pod

    def pods(self, track: Track) -> list[str]:
        """The track's ready pods, less those that just failed to answer."""
        with self._lock:
            known = self._pods.get(track)
            if known is None and self.api is not None:
                self._pods[track] = []  # listed by the thread from now on
                self._start()
            now = time.monotonic()
            return [p for p in known or [] if self._quarantined.get(p, 0.0) <= now]

    def assign(self, request_id: str, track: Track, key: str) -> str | None:
        """The pod for one try of a request (None: the Service picks); a retry's earlier pod is
        released first."""
        self.release(request_id)
        pod = pick(key, self.pods(track), self._load)
        if pod is not None:
            self._assigned[request_id] = pod
            self._load[pod] = self._load.get(pod, 0) + 1
        return pod

    def release(self, request_id: str | None) -> None:
        pod = self._assigned.pop(request_id, None) if request_id else None
        if pod is not None:
            self._load[pod] -= 1
            if not self._load[pod]:
                del self._load[pod]

    def assigned(self, request_id: str | None) -> str | None:
        return self._assigned.get(request_id) if request_id else None

    def quarantine(self, pod: str) -> None:
        """A pod that did not answer: out of every pick until its readiness would have said so."""
        with self._lock:
            self._quarantined[pod] = time.monotonic() + QUARANTINE_SECONDS

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._poll, name="spear-fleet-pods",
                                            daemon=True)
            self._thread.start()

    def _poll(self) -> None:
        while True:
            with self._lock:
                tracks = list(self._pods)
            for track in tracks:
                try:
                    found = ready_addresses(self.api.slices(track), track.port)
                except Exception as e:  # noqa: BLE001 (keep the last listing; say why)
                    log.warning("spear_gateway: listing the pods of %s/%s failed: %s",
                                track.namespace, track.service, e)
                    continue
                with self._lock:
                    self._pods[track] = found
            self._list_running({track.namespace for track in tracks})
            time.sleep(POLL_SECONDS)

    def _list_running(self, namespaces: set[str]) -> None:
        global RUNNING
        seen: dict[str, str] = {}
        for namespace in sorted(namespaces):
            try:
                seen.update(running(self.api.pods(namespace)))
            except Exception as e:  # noqa: BLE001 (receipts then sign no pair; say why)
                log.warning("spear_gateway: listing the pods in %s failed: %s", namespace, e)
                return
        RUNNING = seen  # one assignment: a reader sees the last listing or this one
