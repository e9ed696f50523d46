"""`runpod`, `runpodApiKey` and `vllmApiKey`: the RunPod pods that serve the `remote` backend.

Each pod is created through RunPod's REST API (v1) and serves the pinned model with vLLM (seed
001 steps 2-3), reached by the client through an SSH tunnel (seed 000 §6.2.7). Its SSH key is
a key file (`ssh.privateKeyPath`) or a secret in the fleet's `sshPrivateKeys.<name>`; its address
is RunPod's to give, so the stack names none. Pods, inference hosts and backends are then
checked together: a name has one owner in sshPrivateKeys, a backend's tunnel reaches one server.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from config.checker import API_URL_TEXT, Checker, api_url, map_names
from config.options import (BACKEND, KEY_PATH, SECRET, Later, Named, Obj, Opt, Text, build,
                            declared)
from config.schema.common import api_key, port_backend, private_key, ssh_key_entry
from config.types import (API_KEY_NAMES, GPU_TYPES_TEXT, POD_PORTS_TEXT, RUNPOD_API_KEY,
                          VLLM_API_KEY, ApiKey, Backend, InferenceHost, PodSsh, RunPodPod)

DEFAULT_API_URL = "https://rest.runpod.io/v1"
SSH_PORT = "22/tcp"  # RunPod maps it to a public port; spear-fleet logs in through it

POD = declared(
    RunPodPod,
    backend=Opt(BACKEND, "the client backend whose tunnel reaches vLLM", default="remote"),
    ssh=Opt(declared(PodSsh, privateKeyPath=Opt(KEY_PATH, "a private key file (or"
                                                " sshPrivateKeys.<name>)", default=None)),
            "how spear-fleet logs in (the address is RunPod's to give)", default={}))
_PODS = Named(POD, "a pod", non_empty=False)
OPTIONS = {
    "runpod": Opt(Obj({"apiUrl": Opt(Text(api_url, API_URL_TEXT), "RunPod's REST API v1",
                                     default=DEFAULT_API_URL),
                       "pods": Opt(Later(_PODS), "the pods, by name", default={})}),
                  "RunPod pods serving the remote backend", default={}),
    RUNPOD_API_KEY: Opt(SECRET, "RunPod's API key (with runpod.pods)", default=None),
    VLLM_API_KEY: Opt(SECRET, "the key vLLM demands of its clients (pods, vllmFleet)",
                      default=None),
}


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
    runpod = OPTIONS["runpod"].read(check, "runpod", value)
    pods = None if runpod is None else _PODS.entries(check, "runpod.pods", runpod["pods"])
    api_keys = {name: api_key(check, name, api_key_values[name], [
                    *(["runpod.pods"] if pods else []),
                    *([also_needed_by[name]] if name in (also_needed_by or {}) else [])])
                for name in API_KEY_NAMES}
    if runpod is None or pods is None:
        return {}, {name: key for name, key in api_keys.items() if key is not None}
    base_url = runpod["apiUrl"]
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
    pod = POD.read(check, prefix, value)
    if pod is None:
        return None
    gpu_types, ports, vllm, ssh = pod["gpuTypeIds"], pod["ports"], pod["vllm"], pod["ssh"]
    if gpu_types is not None and None not in gpu_types and len(set(gpu_types)) != len(gpu_types):
        check.fail(f"{prefix}.gpuTypeIds", list(gpu_types), GPU_TYPES_TEXT)
    if ports is not None and None not in ports \
            and (SSH_PORT not in ports or len(set(ports)) != len(ports)):
        check.fail(f"{prefix}.ports", list(ports),
                   POD_PORTS_TEXT + ": spear-fleet reaches vLLM through the pod's sshd")
    backend = port_backend(check, f"{prefix}.backend", pod["backend"], backends)
    login_key = None if secret_key is None or ssh is None else private_key(
        check, name, ssh["privateKeyPath"], secret_key, owner=prefix)
    if vllm and vllm.port == 22:
        check.fail(f"{prefix}.vllm.port", 22, "a port other than 22: the pod's sshd has it")
    if vllm and pod["gpuCount"] and vllm.tensor_parallel_size > pod["gpuCount"]:
        check.fail(f"{prefix}.vllm.tensorParallelSize", vllm.tensor_parallel_size,
                   f"at most gpuCount ({pod['gpuCount']}): vLLM splits the model over the pod's"
                   " GPUs")
    if login_key is None or not check.clean_since(start):
        return None
    return build(RunPodPod, pod, name=name, api_url=api_url, backend=backend,
                 ssh=build(PodSsh, ssh, key=login_key))


def _check_fleet(check: Checker, pods: Mapping[str, RunPodPod],
                 inference_hosts: Mapping[str, InferenceHost]) -> None:
    """A name has one key in sshPrivateKeys (each backend's one server is checked in parse())."""
    for name in pods:
        if name in inference_hosts:
            check.fail(f"runpod.pods.{name}", name,
                       "a name no inference host has: sshPrivateKeys.<name> holds one key")
