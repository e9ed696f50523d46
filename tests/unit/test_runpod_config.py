"""config, RunPod pods: every bad value under `runpod`, `runpodApiKey`, `vllmApiKey` and a pod's
`sshPrivateKeys` entry is refused with the full key, what was given and what is allowed, all at
once and before any resource is registered; the keys are Pulumi secrets and never echoed."""

from __future__ import annotations

import copy
from typing import Any

import pulumi
import pytest

from config.checker import ConfigError
from config.load import StackConfigError, load
from config.load import parse_stack
from config.types import API_KEY_NAMES, RUNPOD_API_KEY, VLLM_API_KEY, ApiKey, InlineKey, KeyFile, PodSsh, Vllm
from tests.support.stack_files import (DUMMY_KEY, commented_example, encrypted_keys,
                                       engine_config, prod_raw, without_fleet)
from tests.support.config_cases import (DELETE, GPU_POD, POD, POD_SECRETS as SECRETS, REVISION, VLLM,
                                        allowed_for, changed, pod_raw, problem_line,
                                        repeated_cases, run_program)

def two_pods(**second: Any) -> dict[str, Any]:
    raw = changed(pod_raw(), ("runpod", "pods", "lab"), {**copy.deepcopy(GPU_POD), **second})
    raw["sshPrivateKeys"]["lab"] = DUMMY_KEY
    return raw


# (id, config, full key without the namespace, a fragment of what is allowed)
BAD = [
    ("revision-branch", changed(pod_raw(), (*VLLM, "revision"), "main"),
     "runpod.pods.gpu.vllm.revision", "a branch or tag name is refused"),
    ("revision-short", changed(pod_raw(), (*VLLM, "revision"), "da6e2ed"),
     "runpod.pods.gpu.vllm.revision", "the model repository's commit id of 40 lowercase hex"),
    ("revision-upper", changed(pod_raw(), (*VLLM, "revision"), REVISION.upper()),
     "runpod.pods.gpu.vllm.revision", "40 lowercase hex"),
    ("revision-missing", changed(pod_raw(), (*VLLM, "revision"), DELETE),
     "runpod.pods.gpu.vllm.revision", "(required)"),
    ("model-not-a-repo", changed(pod_raw(), (*VLLM, "model"), "qwen3-coder"),
     "runpod.pods.gpu.vllm.model", "a Hugging Face repository id"),
    ("served-name-space", changed(pod_raw(), (*VLLM, "servedModelName"), "qwen 3"),
     "runpod.pods.gpu.vllm.servedModelName", "a model name"),
    ("tp-zero", changed(pod_raw(), (*VLLM, "tensorParallelSize"), 0),
     "runpod.pods.gpu.vllm.tensorParallelSize", "an integer >= 1"),
    ("tp-over-gpus", changed(pod_raw(), (*VLLM, "tensorParallelSize"), 4),
     "runpod.pods.gpu.vllm.tensorParallelSize", "at most gpuCount (2)"),
    ("max-model-len-missing", changed(pod_raw(), (*VLLM, "maxModelLen"), DELETE),
     "runpod.pods.gpu.vllm.maxModelLen", "no default: state it in the stack"),
    ("vllm-port-ssh", changed(pod_raw(), (*VLLM, "port"), 22),
     "runpod.pods.gpu.vllm.port", "a port other than 22"),
    ("vllm-port-big", changed(pod_raw(), (*VLLM, "port"), 70000),
     "runpod.pods.gpu.vllm.port", "an integer 1-65535"),
    ("vllm-unknown-flag", changed(pod_raw(), (*VLLM, "quantization"), "fp8"),
     "runpod.pods.gpu.vllm.quantization", "one of model, revision, servedModelName"),
    ("vllm-missing", changed(pod_raw(), VLLM, DELETE),
     "runpod.pods.gpu.vllm", "an object with keys model, revision"),
    ("gpu-types-empty", changed(pod_raw(), (*POD, "gpuTypeIds"), []),
     "runpod.pods.gpu.gpuTypeIds", "a non-empty list of RunPod GPU type ids"),
    ("gpu-types-missing", changed(pod_raw(), (*POD, "gpuTypeIds"), DELETE),
     "runpod.pods.gpu.gpuTypeIds", "(required)"),
    ("gpu-type-line-break", changed(pod_raw(), (*POD, "gpuTypeIds"), ["NVIDIA H100\n"]),
     "runpod.pods.gpu.gpuTypeIds[0]", "a RunPod GPU type id"),
    ("gpu-types-twice", changed(pod_raw(), (*POD, "gpuTypeIds"), ["NVIDIA L4", "NVIDIA L4"]),
     "runpod.pods.gpu.gpuTypeIds", "each once"),
    ("gpu-count-zero", changed(pod_raw(), (*POD, "gpuCount"), 0),
     "runpod.pods.gpu.gpuCount", "an integer >= 1"),
    ("image-latest", changed(pod_raw(), (*POD, "imageName"), "vllm/vllm-openai:latest"),
     "runpod.pods.gpu.imageName", "not :latest"),
    ("image-untagged", changed(pod_raw(), (*POD, "imageName"), "vllm/vllm-openai"),
     "runpod.pods.gpu.imageName", "a version tag or an @sha256 digest"),
    ("image-missing", changed(pod_raw(), (*POD, "imageName"), DELETE),
     "runpod.pods.gpu.imageName", "(required)"),
    ("disk-missing", changed(pod_raw(), (*POD, "containerDiskInGb"), DELETE),
     "runpod.pods.gpu.containerDiskInGb", "required: the image and vLLM need room"),
    ("volume-negative", changed(pod_raw(), (*POD, "volumeInGb"), -1),
     "runpod.pods.gpu.volumeInGb", "an integer >= 0"),
    ("cloud-type", changed(pod_raw(), (*POD, "cloudType"), "PRIVATE"),
     "runpod.pods.gpu.cloudType", "one of SECURE, COMMUNITY"),
    ("ports-without-ssh", changed(pod_raw(), (*POD, "ports"), ["8888/http"]),
     "runpod.pods.gpu.ports", "with 22/tcp: spear-fleet reaches vLLM through the pod's sshd"),
    ("port-protocol", changed(pod_raw(), (*POD, "ports"), ["22/udp"]),
     "runpod.pods.gpu.ports[0]", "'<port>/tcp' or '<port>/http'"),
    ("port-number", changed(pod_raw(), (*POD, "ports"), ["22/tcp", "70000/http"]),
     "runpod.pods.gpu.ports[1]", "port 1-65535"),
    ("ports-twice", changed(pod_raw(), (*POD, "ports"), ["22/tcp", "22/tcp"]),
     "runpod.pods.gpu.ports", "each once"),
    ("ports-not-a-list", changed(pod_raw(), (*POD, "ports"), "22/tcp"),
     "runpod.pods.gpu.ports", "a list of '<port>/tcp'"),
    ("backend-api", changed(pod_raw(), (*POD, "backend"), "anthropic"),
     "runpod.pods.gpu.backend", "one of local, remote, reds"),
    ("backend-of-a-host", changed(pod_raw(), (*POD, "backend"), "reds"),
     "runpod.pods.gpu.backend", "a backend inferenceHosts.reds does not use"),
    ("backend-of-another-pod", two_pods(), "runpod.pods.lab.backend",
     "a backend runpod.pods.gpu does not use: the client's port 8081 tunnels to one server"),
    ("pod-named-like-a-host", changed(two_pods(), ("runpod", "pods", "reds"), GPU_POD),
     "runpod.pods.reds", "a name no inference host has"),
    ("pod-name", changed(pod_raw(), ("runpod", "pods", "GPU_1"), GPU_POD),
     "runpod.pods.GPU_1", "a name of lowercase letters"),
    ("pod-unknown-key", changed(pod_raw(), (*POD, "gpuType"), "NVIDIA L4"),
     "runpod.pods.gpu.gpuType", "one of gpuTypeIds, gpuCount, imageName"),
    ("pod-not-an-object", changed(pod_raw(), POD, "h100"),
     "runpod.pods.gpu", "an object with keys gpuTypeIds"),
    ("runpod-unknown-key", changed(pod_raw(), ("runpod", "podz"), {}),
     "runpod.podz", "one of apiUrl, pods"),
    ("api-url-plain-http", changed(pod_raw(), ("runpod", "apiUrl"), "http://rest.runpod.io/v1"),
     "runpod.apiUrl", "an https URL (http only on a loopback address"),
    ("api-url-not-a-url", changed(pod_raw(), ("runpod", "apiUrl"), "rest.runpod.io"),
     "runpod.apiUrl", "an https URL"),
    ("ssh-key-missing", changed(pod_raw(), ("sshPrivateKeys", "gpu"), DELETE),
     "sshPrivateKeys.gpu", "exactly one of runpod.pods.gpu.ssh.privateKeyPath (a key file) or"
     " sshPrivateKeys.gpu"),
    ("ssh-key-and-file", changed(pod_raw(), (*POD, "ssh", "privateKeyPath"), "~/.ssh/id"),
     "runpod.pods.gpu.ssh.privateKeyPath", "exactly one of runpod.pods.gpu.ssh.privateKeyPath"),
    ("ssh-key-not-a-key", changed(pod_raw(), ("sshPrivateKeys", "gpu"), "hunter2"),
     "sshPrivateKeys.gpu", "a private key (-----BEGIN"),
    ("ssh-address", changed(pod_raw(), (*POD, "ssh", "host"), "1.2.3.4"),
     "runpod.pods.gpu.ssh.host", "one of user, privateKeyPath"),
    ("ssh-user", changed(pod_raw(), (*POD, "ssh", "user"), "bad user"),
     "runpod.pods.gpu.ssh.user", "a user name"),
    ("key-for-nothing", changed(pod_raw(), ("sshPrivateKeys", "other"), DUMMY_KEY),
     "sshPrivateKeys.other", "one of the inferenceHosts or pods: reds, gpu"),
    ("runpod-key-missing", changed(pod_raw(), ("runpodApiKey",), DELETE),
     "runpodApiKey", "a secret (required with runpod.pods): pulumi config set --secret runpodApiKey"),
    ("vllm-key-missing", changed(pod_raw(), ("vllmApiKey",), DELETE),
     "vllmApiKey", "a secret (required with runpod.pods)"),
    ("vllm-key-two-lines", changed(pod_raw(), ("vllmApiKey",), "sk-a\nsk-b"),
     "vllmApiKey", "one line of printable characters without spaces"),
]


@pytest.mark.parametrize("raw,key,allowed", [case[1:] for case in BAD], ids=[case[0] for case in BAD])
def test_a_bad_pod_value_is_refused_naming_key_and_allowed(mocks, raw, key, allowed):
    assert allowed in allowed_for(mocks, raw, key, SECRETS)


def test_no_two_bad_pod_cases_share_an_id_or_a_refusal():
    assert repeated_cases(BAD) == []


def test_a_pod_parses_to_its_typed_config():
    cfg = parse_stack(pod_raw())
    pod = cfg.runpod_pods["gpu"]
    assert (pod.name, pod.api_url, pod.gpu_type_ids, pod.gpu_count, pod.image_name) == (
        "gpu", "https://rest.runpod.io/v1", ("NVIDIA H100 80GB HBM3",), 2, "vllm/vllm-openai:v0.24.0")
    assert (pod.container_disk_in_gb, pod.volume_in_gb, pod.cloud_type, pod.ports) == (
        50, 200, "SECURE", ("22/tcp",))
    assert pod.backend == cfg.backends["remote"] and pod.backend.port == 8081
    assert pod.ssh == PodSsh(user="root", key=InlineKey(DUMMY_KEY))
    assert pod.vllm == Vllm(model="Qwen/Qwen3-Coder-Next-FP8", revision=REVISION,
                            served_model_name="qwen3-coder-next", tensor_parallel_size=2,
                            max_model_len=262144, port=8000)
    assert cfg.api_keys == {"runpodApiKey": ApiKey("rpa_TESTKEY"), "vllmApiKey": ApiKey("sk-vllm-test")}
    assert list(cfg.inference_hosts) == ["reds"]


def test_pod_defaults():
    raw = pod_raw()
    pod = raw["runpod"]["pods"]["gpu"]
    for key in ("gpuCount", "cloudType", "ports", "backend", "ssh"):
        del pod[key]
    for key in ("tensorParallelSize", "port"):
        del pod["vllm"][key]
    parsed = parse_stack(raw).runpod_pods["gpu"]
    assert (parsed.gpu_count, parsed.cloud_type, parsed.ports, parsed.backend.name) == (
        1, "SECURE", ("22/tcp",), "remote")
    assert (parsed.ssh.user, parsed.vllm.tensor_parallel_size, parsed.vllm.port) == ("root", 1, 8000)


def test_a_stand_in_api_on_this_machine_may_be_plain_http():
    raw = changed(pod_raw(), ("runpod", "apiUrl"), "http://127.0.0.1:8123/v1/")
    assert parse_stack(raw).runpod_pods["gpu"].api_url == "http://127.0.0.1:8123/v1"


def test_a_pod_may_log_in_with_a_key_file():
    raw = changed(pod_raw(), ("sshPrivateKeys", "gpu"), DELETE)
    raw = changed(raw, (*POD, "ssh", "privateKeyPath"), "/keys/gpu")
    assert parse_stack(raw).runpod_pods["gpu"].ssh.key == KeyFile("/keys/gpu")


def test_a_stack_without_pods_has_none_and_needs_no_api_keys():
    cfg = parse_stack(without_fleet(prod_raw()))
    assert cfg.runpod_pods == {} and cfg.api_keys == {}


def test_all_pod_problems_are_reported_at_once_one_per_line():
    raw = changed(pod_raw(), (*VLLM, "revision"), "main")
    raw = changed(raw, (*POD, "imageName"), "vllm/vllm-openai:latest")
    raw = changed(raw, (*POD, "ports"), ["8888/http"])
    raw = changed(raw, ("vllmApiKey",), DELETE)
    with pytest.raises(ConfigError) as error:
        parse_stack(raw)
    assert [problem.key for problem in error.value.problems] == [
        "spear-fleet:vllmApiKey", "spear-fleet:runpod.pods.gpu.imageName",
        "spear-fleet:runpod.pods.gpu.vllm.revision", "spear-fleet:runpod.pods.gpu.ports"]


def test_api_keys_are_never_echoed():
    with pytest.raises(ConfigError) as error:
        parse_stack(changed(pod_raw(), ("vllmApiKey",), "sk-hunter2 secret"))
    assert "hunter2" not in str(error.value)
    assert "rpa_TESTKEY" not in repr(parse_stack(pod_raw()))


def test_api_keys_in_plain_text_are_refused(mocks):
    with pytest.raises(StackConfigError) as error:
        run_program(engine_config(pod_raw()), ["spear-fleet:sshPrivateKeys"])
    assert mocks.registered == []
    assert problem_line(error.value, "runpodApiKey") == (
        "spear-fleet:runpodApiKey: got a plain-text value; allowed: a secret: pulumi config set"
        " --secret runpodApiKey < file")
    problem_line(error.value, "vllmApiKey")


def test_a_pods_unreadable_key_file_is_named_by_the_pods_key(mocks, tmp_path):
    raw = changed(pod_raw(), ("sshPrivateKeys", "gpu"), DELETE)
    raw = changed(raw, (*POD, "ssh", "privateKeyPath"), str(tmp_path / "absent"))
    with pytest.raises(StackConfigError) as error:
        run_program(engine_config(raw), SECRETS)
    assert "a readable private key file" in problem_line(error.value,
                                                         "runpod.pods.gpu.ssh.privateKeyPath")


def test_loaded_keys_are_secret_outputs(mocks):
    pulumi.runtime.set_all_config(engine_config(pod_raw()), SECRETS)
    seen: list[tuple[str, bool, str]] = []

    @pulumi.runtime.test
    def program():
        stack = load()
        outputs = {"ssh gpu": stack.ssh_keys["gpu"], **stack.api_keys}
        return pulumi.Output.all(*[
            pulumi.Output.all(output.is_secret(), output).apply(
                lambda pair, name=name: seen.append((name, pair[0], pair[1])))
            for name, output in outputs.items()])

    program()
    assert sorted(seen) == [("runpodApiKey", True, "rpa_TESTKEY"), ("ssh gpu", True, DUMMY_KEY),
                            ("vllmApiKey", True, "sk-vllm-test")]


def prod_example() -> dict[str, Any]:
    """prod with its commented RunPod example uncommented (the encrypted keys as placeholders; the
    vLLM key is prod's own, set for its fleet)."""
    assert set(commented_example("prod", RUNPOD_API_KEY)) == {"secure"}
    assert f"spear-fleet:{VLLM_API_KEY}" in encrypted_keys("prod")
    return {**prod_raw(), "runpod": commented_example("prod", "runpod"),
            RUNPOD_API_KEY: f"placeholder-{RUNPOD_API_KEY}"}


def test_prods_commented_pod_example_parses_to_the_cookbooks_serve_command():
    cfg = parse_stack(prod_example())
    pod = cfg.runpod_pods["gpu"]
    assert pod.vllm == Vllm(model="Qwen/Qwen3-Coder-Next-FP8", revision=REVISION,
                            served_model_name="qwen3-coder-next", tensor_parallel_size=2,
                            max_model_len=262144, port=8000)
    assert (pod.image_name, pod.gpu_count, pod.backend.name) == ("vllm/vllm-openai:v0.24.0", 2, "remote")
    assert isinstance(pod.ssh.key, KeyFile)
    assert set(cfg.api_keys) == set(API_KEY_NAMES)
