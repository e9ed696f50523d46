"""RunPodPod: a RunPod pod, made and read through RunPod's REST API (v1).

Its diff is the upgrade the API allows: a field PodUpdateInput takes (image, disks, ports, env,
name) is a PATCH, which resets the pod in place (it restarts, and RunPod gives its SSH port a new
public port); a field only PodCreateInput takes (GPU types and count, cloud type) needs a new pod,
so it replaces the resource. `read` asks the API, so a refresh sees a pod stopped or changed by
hand, and the next `up` starts it or puts the stack's values back.

The pod's SSH endpoint (its public IP and the public port mapped to 22) is RunPod's to give and
changes on every restart: it is read from the API after every create, update and read, and is an
output, which is where the resources that log in to the pod take it from.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, ReadResult, Resource, UpdateResult

from components.hostops.host_resource import HostProvider
from components.hostops.waiting import wait_until
from config.types import RunPodPod as PodConfig
from review.kinds import RECREATE_POD, RESET_POD, Kind
from spear import tokens

RUNNING = "RUNNING"
SSH_PORT = "22"  # the pod's port whose public mapping spear-fleet logs in through
# props -> the API's field names. PodUpdateInput takes the first ones (a PATCH resets the pod);
# a change of the others needs a new pod (only PodCreateInput has them).
UPDATABLE = {"name": "name", "image_name": "imageName", "container_disk_in_gb": "containerDiskInGb",
             "volume_in_gb": "volumeInGb", "ports": "ports", "env": "env"}
CREATE_ONLY = {"gpu_type_ids": "gpuTypeIds", "gpu_count": "gpuCount", "cloud_type": "cloudType"}
# What a read gives back, by the Pod schema's names (it calls the image `image`).
_OBSERVED = {"name": "name", "image_name": "image", "container_disk_in_gb": "containerDiskInGb",
             "volume_in_gb": "volumeInGb"}
POLL_SECONDS = 2.0


class RunPodError(Exception):
    """The API refused a request or could not be reached; the message never holds the key."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class RunPodApi:
    """JSON over HTTPS with the key as `Authorization: Bearer`, as the API's security scheme says."""

    def __init__(self, url: str, key: str, timeout: float = 60.0) -> None:
        self.url, self._key, self.timeout = url, key, timeout

    def call(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        """The answer's JSON (None when it has no body); RunPodError for any status >= 300."""
        request = urllib.request.Request(
            self.url + path, method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self._key}", "Accept": "application/json",
                     **({} if body is None else {"Content-Type": "application/json"})})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as err:
            detail = err.read().decode(errors="replace")[:500]
            raise RunPodError(f"RunPod API: {method} {path}: HTTP {err.code}: {detail}",
                              err.code) from None
        except (urllib.error.URLError, OSError) as err:
            raise RunPodError(f"RunPod API at {self.url} unreachable: {err}") from None


def ssh_endpoint(pod: Mapping[str, Any]) -> tuple[str | None, int | None]:
    """The public IP and the public port mapped to 22; (None, None) while there is none."""
    port = (pod.get("portMappings") or {}).get(SSH_PORT)
    host = pod.get("publicIp") or None
    return (host, int(port)) if host and port else (None, None)


def observed(props: Mapping[str, Any], pod: Mapping[str, Any]) -> dict[str, Any]:
    """props with what the API says the pod is: its fields, status and SSH endpoint."""
    outs = {**props, **{prop: pod[field] for prop, field in _OBSERVED.items() if field in pod}}
    if sorted(pod.get("ports") or []) != sorted(props["ports"]):
        outs["ports"] = pod.get("ports") or []
    # Only the variables the stack sets: RunPod may add its own.
    env = pod.get("env") or {}
    outs["env"] = {key: env.get(key) for key in props["env"]}
    if isinstance(pod.get("gpu"), Mapping) and "count" in pod["gpu"]:
        outs["gpu_count"] = pod["gpu"]["count"]
    ssh_host, ssh_port = ssh_endpoint(pod)
    return {**outs, "pod_id": pod["id"], "desired_status": pod.get("desiredStatus"),
            "last_started_at": pod.get("lastStartedAt"), "ssh_host": ssh_host, "ssh_port": ssh_port}


class RunPodPodProvider(HostProvider):
    replace_fields = (*CREATE_ONLY, "api_url")  # another API is another account: a new pod
    update_fields = tuple(UPDATABLE)

    def stale(self, olds: Mapping[str, Any]) -> bool:
        return olds.get("desired_status") != RUNNING  # refresh found it stopped: `up` starts it

    def create(self, props: Mapping[str, Any]) -> CreateResult:
        api = _api(props)
        body = _body(props, {**UPDATABLE, **CREATE_ONLY})
        # On Community Cloud a pod has a public IP only when asked; SSH needs one.
        pod = api.call("POST", "/pods", {**body, "supportPublicIp": True})
        try:
            pod = _wait_ready(api, pod["id"], props, started_before=None)
        except RunPodError:
            api.call("DELETE", f"/pods/{pod['id']}")  # a pod nobody can reach still bills
            raise
        return CreateResult(id_=pod["id"], outs=observed(props, pod))

    def update(self, id_: str, olds: Mapping[str, Any], news: Mapping[str, Any]) -> UpdateResult:
        api = _api(news)
        changed = _body(news, {prop: field for prop, field in UPDATABLE.items()
                               if olds.get(prop) != news.get(prop)})
        stopped = olds.get("desired_status") != RUNNING
        if changed:
            api.call("PATCH", f"/pods/{id_}", changed)
        if stopped:
            api.call("POST", f"/pods/{id_}/start")
        # A PATCH or a start restarts the pod: wait for the new start, not the old endpoint.
        pod = _wait_ready(api, id_, news, started_before=(
            olds.get("last_started_at") if changed or stopped else None))
        return UpdateResult(outs=observed(news, pod))

    def read(self, id_: str, props: Mapping[str, Any]) -> ReadResult:
        try:
            pod = _api(props).call("GET", f"/pods/{id_}")
        except RunPodError as err:
            if err.status == 404:
                return ReadResult(id_=None, outs={})  # deleted by hand: `up` makes a new one
            raise
        if pod.get("desiredStatus") == "TERMINATED":
            return ReadResult(id_=None, outs={})
        return ReadResult(id_=id_, outs=observed(props, pod))

    def delete(self, id_: str, props: Mapping[str, Any]) -> None:
        try:
            _api(props).call("DELETE", f"/pods/{id_}")
        except RunPodError as err:
            if err.status != 404:  # already gone is what a delete wants
                raise


def _body(props: Mapping[str, Any], fields: Mapping[str, str]) -> dict[str, Any]:
    """These props by the API's names. Numbers reach a dynamic provider as floats; the API's
    integer fields refuse 2.0, so a whole number goes as an integer."""
    return {field: int(props[prop]) if isinstance(props[prop], float) and props[prop].is_integer()
            else props[prop] for prop, field in fields.items()}


def _api(props: Mapping[str, Any]) -> RunPodApi:
    return RunPodApi(props["api_url"], props["api_key"])


def _wait_ready(api: RunPodApi, pod_id: str, props: Mapping[str, Any],
                started_before: str | None) -> dict[str, Any]:
    """The pod once it runs with an SSH endpoint (and, after a restart, a new start time)."""
    pod: dict[str, Any] = {}

    def ready() -> bool:
        nonlocal pod
        pod = api.call("GET", f"/pods/{pod_id}")
        restarted = started_before is None or pod.get("lastStartedAt") != started_before
        return pod.get("desiredStatus") == RUNNING and all(ssh_endpoint(pod)) and restarted

    if wait_until(ready, float(props["ready_timeout_seconds"]), POLL_SECONDS):
        return pod
    raise RunPodError(
        f"pod {pod_id} has no SSH endpoint after {props['ready_timeout_seconds']} s"
        f" (desiredStatus {pod.get('desiredStatus')}, publicIp {pod.get('publicIp')},"
        f" portMappings {pod.get('portMappings')}, lastStartedAt {pod.get('lastStartedAt')})")


@dataclass
class RunPodPodArgs:
    config: PodConfig
    api_key: pulumi.Input[str]  # secret
    pod_name: str  # the pod's name on RunPod
    env: dict[str, pulumi.Input[str]]  # PUBLIC_KEY: RunPod images authorise it for SSH
    # Pulling a vLLM image onto a new machine can take many minutes.
    ready_timeout_seconds: int = 1800


# The API updates a pod by resetting it, and cannot change some of it in place at all.
KIND = Kind.of(tokens.RUNPOD_POD, "RunPod pod", RESET_POD, replace=RECREATE_POD)

class RunPodPod(Resource, module=tokens.DYNAMIC_MODULE, name=tokens.RUNPOD_POD.name):
    pod_id: pulumi.Output[str]
    ssh_host: pulumi.Output[str]
    ssh_port: pulumi.Output[int]
    desired_status: pulumi.Output[str]
    last_started_at: pulumi.Output[str]

    def __init__(self, name: str, args: RunPodPodArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        cfg = args.config
        props = {
            "api_url": cfg.api_url,
            "api_key": args.api_key,
            "name": args.pod_name,
            "image_name": cfg.image_name,
            "gpu_type_ids": list(cfg.gpu_type_ids),
            "gpu_count": cfg.gpu_count,
            "cloud_type": cfg.cloud_type,
            "container_disk_in_gb": cfg.container_disk_in_gb,
            "volume_in_gb": cfg.volume_in_gb,
            "ports": list(cfg.ports),
            "env": args.env,
            "ready_timeout_seconds": args.ready_timeout_seconds,
        }
        outputs = ("pod_id", "ssh_host", "ssh_port", "desired_status", "last_started_at")
        super().__init__(RunPodPodProvider(), name, {**props, **{out: None for out in outputs}},
                         pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
                             additional_secret_outputs=["api_key"])))
