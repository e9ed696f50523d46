"""`runpod`, `runpodApiKey` and `vllmApiKey`: the RunPod pods that serve the `remote` backend.

Each pod is created through RunPod's REST API (v1) and serves the pinned model with vLLM (seed
001 steps 2-3), reached by the client through an SSH tunnel (seed 000 §6.2.7). Its SSH key is
a key file (`ssh.privateKeyPath`) or a secret in the fleet's `sshPrivateKeys.<name>`; its address
is RunPod's to give, so the stack names none. Pods, inference hosts and backends are then
checked together: a name has one owner in sshPrivateKeys, a backend's tunnel reaches one server.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from config.checker import API_URL_TEXT, MISSING, USER, Checker, api_url, get, map_names
from config.schema.common import (HF_REPO, SERVED_NAME, api_key, model_revision, port_backend,
                                  private_key, ssh_key_entry)
from config.types import (API_KEY_NAMES, CLOUD_TYPES, ApiKey, Backend, InferenceHost, PodSsh,
                          RunPodPod, Vllm)
from spear.rules import image_pin_problem

KEYS = ("runpod",) + API_KEY_NAMES
# Keys whose value is an object (the loader reads them as JSON); the API keys are text.
OBJECT_KEYS = ("runpod",)

DEFAULT_API_URL = "https://rest.runpod.io/v1"
SSH_PORT = "22/tcp"  # RunPod maps it to a public port; spear-fleet logs in through it

_POD_KEYS = ("gpuTypeIds", "gpuCount", "imageName", "containerDiskInGb", "volumeInGb",
             "cloudType", "ports", "backend", "ssh", "vllm")
_VLLM_KEYS = ("model", "revision", "servedModelName", "tensorParallelSize", "maxModelLen", "port")
_GPU_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._-]*")
_POD_PORT = re.compile(r"(?P<port>[0-9]{1,5})/(tcp|http)")
_IMAGE_TEXT = ("an image with a version tag or an @sha256 digest (not :latest, and not untagged:"
               " the engine version is part of the pin, seed 001 'Maintenance')")


def pod_names(value: Any) -> list[str]:
    """The pod names a stack declares, before any check (for the sshPrivateKeys name check)."""
    return map_names(value.get("pods") if isinstance(value, Mapping) else None)


def parse(check: Checker, value: Any, api_key_values: Mapping[str, Any], ssh_keys_value: Any,
          backends: Mapping[str, Backend] | None,
          inference_hosts: Mapping[str, InferenceHost],
          also_needed_by: Mapping[str, str] | None = None
          ) -> tuple[dict[str, RunPodPod], dict[str, ApiKey]]:
    """The pods (by name) and the API keys the stack gives (by config key); also_needed_by: an
    API key other declared parts need too (e.g. {"vllmApiKey": "vllmFleet"})."""
    runpod = check.obj("runpod", value, ("apiUrl", "pods"), required=False)
    pods = {} if runpod is None else check.named_map("runpod.pods", get(runpod, "pods"), "a pod",
                                                      required=False)
    api_keys = {name: api_key(check, name, api_key_values[name], [
                    *(["runpod.pods"] if pods else []),
                    *([also_needed_by[name]] if name in (also_needed_by or {}) else [])])
                for name in API_KEY_NAMES}
    if runpod is None or pods is None:
        return {}, {name: key for name, key in api_keys.items() if key is not None}
    base_url = check.text("runpod.apiUrl", get(runpod, "apiUrl"), api_url, API_URL_TEXT,
                          default=DEFAULT_API_URL)
    parsed = {}
    for name, item in pods.items():
        pod = _pod(check, name, item, base_url, ssh_key_entry(ssh_keys_value, name), backends)
        if pod is not None:
            parsed[name] = pod
    _check_fleet(check, parsed, inference_hosts)
    return parsed, {name: key for name, key in api_keys.items() if key is not None}


def _pod(check: Checker, name: str, value: Any, api_url: str | None, secret_key: Any,
         backends: Mapping[str, Backend] | None) -> RunPodPod | None:
    start = check.mark()
    prefix = f"runpod.pods.{name}"
    pod = check.obj(prefix, value, _POD_KEYS)
    if pod is None:
        return None
    gpu_count = check.integer(f"{prefix}.gpuCount", get(pod, "gpuCount"), 1, default=1)
    result = RunPodPod(
        name=name,
        api_url=api_url,
        gpu_type_ids=_gpu_type_ids(check, f"{prefix}.gpuTypeIds", get(pod, "gpuTypeIds")),
        gpu_count=gpu_count,
        image_name=check.text(f"{prefix}.imageName", get(pod, "imageName"), _pinned_image,
                              _IMAGE_TEXT),
        container_disk_in_gb=check.integer(f"{prefix}.containerDiskInGb",
                                           get(pod, "containerDiskInGb"), 1,
                                           note="required: the image and vLLM need room"),
        volume_in_gb=check.integer(f"{prefix}.volumeInGb", get(pod, "volumeInGb"), 0,
                                   note="required: the weights are kept on the volume"),
        cloud_type=check.choice(f"{prefix}.cloudType", get(pod, "cloudType"), CLOUD_TYPES,
                                default="SECURE"),
        ports=_ports(check, f"{prefix}.ports", get(pod, "ports")),
        backend=_backend(check, f"{prefix}.backend", get(pod, "backend"), backends),
        ssh=_ssh(check, name, get(pod, "ssh"), secret_key),
        vllm=_vllm(check, f"{prefix}.vllm", get(pod, "vllm"), gpu_count),
    )
    return result if check.clean_since(start) else None


def _pinned_image(value: str) -> str | None:
    return None if image_pin_problem(value) else value


def _gpu_type_ids(check: Checker, key: str, value: Any) -> tuple[str, ...]:
    what = "a non-empty list of RunPod GPU type ids (e.g. NVIDIA H100 80GB HBM3), each once"
    if not isinstance(value, list) or not value:
        check.fail(key, value, what + (" (required)" if value is MISSING else ""))
        return ()
    ids = [check.pattern(f"{key}[{i}]", item, _GPU_TYPE, "a RunPod GPU type id")
           for i, item in enumerate(value)]
    if len(set(ids)) != len(ids):
        check.fail(key, value, what)
    return tuple(ids)


def _ports(check: Checker, key: str, value: Any) -> tuple[str, ...]:
    what = f"a list of '<port>/tcp' or '<port>/http' (port 1-65535), each once, with {SSH_PORT}"
    if value is MISSING:
        return (SSH_PORT,)
    if not isinstance(value, list):
        check.fail(key, value, what)
        return ()
    ports = []
    for i, item in enumerate(value):
        match = _POD_PORT.fullmatch(item) if isinstance(item, str) else None
        if match is None or not 1 <= int(match["port"]) <= 65535:
            check.fail(f"{key}[{i}]", item, "'<port>/tcp' or '<port>/http', port 1-65535")
        else:
            ports.append(item)
    if len(ports) == len(value) and (SSH_PORT not in ports or len(set(ports)) != len(ports)):
        check.fail(key, value, what + ": spear-fleet reaches vLLM through the pod's sshd")
    return tuple(ports)


def _backend(check: Checker, key: str, value: Any,
             backends: Mapping[str, Backend] | None) -> Backend | None:
    """As an inference host's, but by default the seed's pod backend, `remote`."""
    return port_backend(check, key, "remote" if value is MISSING else value, backends)


def _ssh(check: Checker, name: str, value: Any, secret_key: Any) -> PodSsh | None:
    start = check.mark()
    key = f"runpod.pods.{name}.ssh"
    ssh = check.obj(key, value, ("user", "privateKeyPath"), required=False)
    if ssh is None:
        return None
    user = check.pattern(f"{key}.user", get(ssh, "user"), USER, "a user name", default="root")
    login_key = (None if secret_key is None else
                 private_key(check, name, get(ssh, "privateKeyPath"), secret_key,
                             owner=f"runpod.pods.{name}"))
    if login_key is None or not check.clean_since(start):
        return None
    return PodSsh(user, login_key)


def _vllm(check: Checker, key: str, value: Any, gpu_count: int | None) -> Vllm | None:
    start = check.mark()
    vllm = check.obj(key, value, _VLLM_KEYS)
    if vllm is None:
        return None
    result = Vllm(
        model=check.pattern(f"{key}.model", get(vllm, "model"), HF_REPO,
                            "a Hugging Face repository id (<owner>/<name>)"),
        revision=model_revision(check, f"{key}.revision", get(vllm, "revision")),
        served_model_name=check.pattern(f"{key}.servedModelName", get(vllm, "servedModelName"),
                                        SERVED_NAME,
                                        "a model name (letters, digits, '.', '_', '-'; at most 64)"),
        tensor_parallel_size=check.integer(f"{key}.tensorParallelSize",
                                           get(vllm, "tensorParallelSize"), 1, default=1),
        max_model_len=check.integer(f"{key}.maxModelLen", get(vllm, "maxModelLen"), 1,
                                    note="no default: state it in the stack"),
        port=check.port(f"{key}.port", get(vllm, "port"), 8000),
    )
    if result.port == 22:
        check.fail(f"{key}.port", 22, "a port other than 22: the pod's sshd has it")
    if result.tensor_parallel_size and gpu_count and result.tensor_parallel_size > gpu_count:
        check.fail(f"{key}.tensorParallelSize", result.tensor_parallel_size,
                   f"at most gpuCount ({gpu_count}): vLLM splits the model over the pod's GPUs")
    return result if check.clean_since(start) else None


def _check_fleet(check: Checker, pods: Mapping[str, RunPodPod],
                 inference_hosts: Mapping[str, InferenceHost]) -> None:
    """A name has one key in sshPrivateKeys (each backend's one server is checked in parse())."""
    for name in pods:
        if name in inference_hosts:
            check.fail(f"runpod.pods.{name}", name,
                       "a name no inference host has: sshPrivateKeys.<name> holds one key")
