"""stack_config: every bad value is refused with the full key, what was given and what is
allowed, all problems at once, before any resource is registered; the real stacks parse."""

from __future__ import annotations

import copy
import os
from typing import Any

import pulumi
import pytest

import stack_config
from scripts import llama_source
from stack_config import ConfigError, GitSource, ArchiveSource, parse
from tests.stack_files import DUMMY_KEY, RecordingMocks, engine_config, prod_raw, stack_raw

DELETE = object()


def changed(raw: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    """A deep copy of raw with the value at path replaced (or deleted with DELETE)."""
    result = copy.deepcopy(raw)
    node = result
    for step in path[:-1]:
        node = node[step]
    if value is DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return result


def archive_raw(**source: Any) -> dict[str, Any]:
    base = {"archive": "/srv/llama.tar.gz", "sha256": "ab" * 32, "subdir": "llama.cpp"}
    return changed(prod_raw(), ("llamaCpp", "source"), {**base, **source})


def loopback_raw() -> dict[str, Any]:
    return changed(prod_raw(), ("inferenceHost", "ssh", "host"), "127.0.0.1")


def problem_line(error: ConfigError, key: str) -> str:
    lines = [line for line in str(error).splitlines() if line.startswith(f"spear-fleet:{key}: got ")]
    assert lines, f"no line for spear-fleet:{key} in:\n{error}"
    return lines[0]


# (id, config, full key without the namespace, a fragment of what is allowed)
BAD = [
    ("ctx-missing", changed(prod_raw(), ("server", "ctxSize"), DELETE),
     "server.ctxSize", "no default: state it in the stack"),
    ("ctx-not-int", changed(prod_raw(), ("server", "ctxSize"), "abc"),
     "server.ctxSize", "an integer >= 1 (no default"),
    ("ctx-zero", changed(prod_raw(), ("server", "ctxSize"), 0), "server.ctxSize", "an integer >= 1"),
    ("ctx-bool", changed(prod_raw(), ("server", "ctxSize"), True), "server.ctxSize", "an integer >= 1"),
    ("ctx-float", changed(prod_raw(), ("server", "ctxSize"), 5.5), "server.ctxSize", "an integer >= 1"),
    ("port-zero", changed(prod_raw(), ("server", "port"), 0), "server.port", "an integer 1-65535"),
    ("port-too-big", changed(prod_raw(), ("server", "port"), 70000), "server.port", "an integer 1-65535"),
    ("host-name", changed(prod_raw(), ("server", "host"), "localhost"), "server.host", "an IP address"),
    ("threads-zero", changed(prod_raw(), ("server", "threads"), 0), "server.threads", "an integer >= 1"),
    ("ngl-negative", changed(prod_raw(), ("server", "gpuLayers"), -1),
     "server.gpuLayers", "an integer >= 0"),
    ("cpumoe-negative", changed(prod_raw(), ("server", "cpuMoe"), -3), "server.cpuMoe", "an integer >= 0"),
    ("cpumoe-dense", changed(changed(prod_raw(), ("model", "moe"), False), ("server", "cpuMoe"), 4),
     "server.cpuMoe", "only with model.moe: true"),
    ("parallel-zero", changed(prod_raw(), ("server", "parallel"), 0), "server.parallel", "an integer >= 1"),
    ("server-unknown", changed(prod_raw(), ("server", "ctx"), 4096), "server.ctx", "one of ctxSize, host"),
    ("server-not-object", changed(prod_raw(), ("server",), "524288"), "server", "an object with keys ctxSize"),
    ("ssh-host-missing", changed(prod_raw(), ("inferenceHost", "ssh", "host"), DELETE),
     "inferenceHost.ssh.host", "a host name"),
    ("ssh-host-space", changed(prod_raw(), ("inferenceHost", "ssh", "host"), "reds internal"),
     "inferenceHost.ssh.host", "a host name"),
    ("ssh-port", changed(prod_raw(), ("inferenceHost", "ssh", "port"), 0),
     "inferenceHost.ssh.port", "an integer 1-65535"),
    ("ssh-user", changed(prod_raw(), ("inferenceHost", "ssh", "user"), "bad user"),
     "inferenceHost.ssh.user", "a user name"),
    ("ssh-unknown", changed(prod_raw(), ("inferenceHost", "ssh", "key"), "x"),
     "inferenceHost.ssh.key", "one of host, port, user"),
    ("runtime-relative", changed(prod_raw(), ("inferenceHost", "runtimeDir"), "opt/spear"),
     "inferenceHost.runtimeDir", "an absolute path"),
    ("runtime-root", changed(prod_raw(), ("inferenceHost", "runtimeDir"), "/"),
     "inferenceHost.runtimeDir", "an absolute path other than /"),
    ("backend-unknown", changed(prod_raw(), ("inferenceHost", "backend"), "anthropic"),
     "inferenceHost.backend", "one of local, remote, reds"),
    ("host-not-object", changed(prod_raw(), ("inferenceHost",), "reds.internal"),
     "inferenceHost", "an object with keys ssh, runtimeDir, backend"),
    ("commit-branch", changed(prod_raw(), ("llamaCpp", "source", "commit"), "master"),
     "llamaCpp.source.commit", "a branch or tag name is refused"),
    ("commit-tag", changed(prod_raw(), ("llamaCpp", "source", "commit"), "b6000"),
     "llamaCpp.source.commit", "40 lowercase hex"),
    ("commit-upper", changed(prod_raw(), ("llamaCpp", "source", "commit"), "AA6192D38DEFC9A5D9FB2987413F71B18F214270"),
     "llamaCpp.source.commit", "40 lowercase hex"),
    ("commit-short", changed(prod_raw(), ("llamaCpp", "source", "commit"), "aa6192d"),
     "llamaCpp.source.commit", "40 lowercase hex"),
    ("commit-missing", changed(prod_raw(), ("llamaCpp", "source", "commit"), DELETE),
     "llamaCpp.source.commit", "40 lowercase hex"),
    ("git-and-archive", changed(prod_raw(), ("llamaCpp", "source", "archive"), "/srv/x.tar.gz"),
     "llamaCpp.source", "either {git, commit} or {archive, sha256, subdir}"),
    ("git-with-sha256", changed(prod_raw(), ("llamaCpp", "source", "sha256"), "ab" * 32),
     "llamaCpp.source.sha256", "one of git, commit"),
    ("archive-sha-short", archive_raw(sha256="abc123"), "llamaCpp.source.sha256", "64 hex characters"),
    ("archive-relative", archive_raw(archive="sources/llama.tar.gz"),
     "llamaCpp.source.archive", "an absolute local path"),
    ("archive-ftp", archive_raw(archive="ftp://example.org/llama.tar.gz"),
     "llamaCpp.source.archive", "or an http(s) URL"),
    ("archive-subdir-up", archive_raw(subdir="../etc"), "llamaCpp.source.subdir", "without '..'"),
    ("profile", changed(prod_raw(), ("llamaCpp", "profile"), "cuda"), "llamaCpp.profile", "one of gpu, cpu"),
    ("cmake-flag", changed(prod_raw(), ("llamaCpp", "extraCmakeFlags"), ["GGML_CUDA=ON"]),
     "llamaCpp.extraCmakeFlags[0]", "a -DNAME=value"),
    ("cmake-not-list", changed(prod_raw(), ("llamaCpp", "extraCmakeFlags"), "-DX=1"),
     "llamaCpp.extraCmakeFlags", "a list of -DNAME=value strings"),
    ("arch", changed(prod_raw(), ("model", "arch"), "Qwen3-Next"), "model.arch", "[a-z0-9_]+"),
    ("native-missing", changed(prod_raw(), ("model", "nativeCtx"), DELETE),
     "model.nativeCtx", "the context length it was trained at"),
    ("moe-string", changed(prod_raw(), ("model", "moe"), "yes"), "model.moe", "true or false"),
    ("shards-empty", changed(prod_raw(), ("model", "shards"), []), "model.shards", "a non-empty list"),
    ("shard-sha", changed(prod_raw(), ("model", "shards", 1, "sha256"), "abc"),
     "model.shards[1].sha256", "64 hex characters"),
    ("shard-name-path", changed(prod_raw(), ("model", "shards", 0, "name"), "../x.gguf"),
     "model.shards[0].name", "no '/'"),
    ("shard-size", changed(prod_raw(), ("model", "shards", 2, "size"), 0),
     "model.shards[2].size", "an integer >= 1"),
    ("shard-duplicate", changed(prod_raw(), ("model", "shards", 3, "name"),
                                "Qwen3-Coder-Next-Q8_0-00001-of-00004.gguf"),
     "model.shards[3].name", "a name no other shard has"),
    ("shard-source", changed(prod_raw(), ("model", "shards", 0, "source"), "ftp://x/y.gguf"),
     "model.shards[0].source", "an http(s) URL"),
    ("adapter-path", changed(prod_raw(), ("model", "adapter"), "lora/x.gguf"),
     "model.adapter", "or none for the base model"),
    ("backends-clash", changed(prod_raw(), ("backends", "remote"), 8080),
     "backends.remote", "a port other than backends.local (8080)"),
    ("backends-port", changed(prod_raw(), ("backends", "reds"), 0), "backends.reds", "an integer 1-65535"),
    ("backends-unknown", changed(prod_raw(), ("backends", "anthropic"), 8083),
     "backends.anthropic", "one of local, remote, reds"),
    ("loopback-backend-port", changed(loopback_raw(), ("server", "port"), 8082),
     "server.port", "a port other than backends.reds"),
    ("loopback-ssh-port", changed(loopback_raw(), ("server", "port"), 22),
     "server.port", "a port other than inferenceHost.ssh.port"),
    ("top-unknown", changed(prod_raw(), ("serverr",), {}), "serverr", "one of inferenceHost, sshPrivateKey"),
    ("key-and-path", changed(prod_raw(), ("sshPrivateKeyPath",), "~/.ssh/id"),
     "sshPrivateKeyPath", "exactly one of sshPrivateKey"),
    ("key-neither", changed(prod_raw(), ("sshPrivateKey",), DELETE),
     "sshPrivateKey", "exactly one of sshPrivateKey"),
    ("key-not-a-key", changed(prod_raw(), ("sshPrivateKey",), "hunter2-secret"),
     "sshPrivateKey", "a private key (-----BEGIN"),
]


@pytest.mark.parametrize("raw,key,allowed", [case[1:] for case in BAD], ids=[case[0] for case in BAD])
def test_bad_value_is_refused_naming_key_and_allowed(mocks, raw, key, allowed):
    # Through load() as the program runs it, so each case also proves nothing was registered.
    with pytest.raises(ConfigError) as error:
        run_program(engine_config(raw), SECRET)
    assert list(mocks.resources) == []
    line = problem_line(error.value, key)
    assert "; allowed: " in line
    assert allowed in line.split("; allowed: ", 1)[1]


def test_bad_cases_are_many_and_distinct():
    assert len(BAD) >= 25
    assert len({case[0] for case in BAD}) == len(BAD)


def test_message_shows_what_was_given():
    with pytest.raises(ConfigError) as error:
        parse(changed(prod_raw(), ("server", "ctxSize"), "abc"))
    assert problem_line(error.value, "server.ctxSize") == (
        "spear-fleet:server.ctxSize: got 'abc'; allowed: an integer >= 1 "
        "(no default: state it in the stack)")


def test_secret_is_never_echoed():
    with pytest.raises(ConfigError) as error:
        parse(changed(prod_raw(), ("sshPrivateKey",), "hunter2-secret"))
    assert "hunter2" not in str(error.value)


def test_all_problems_are_reported_at_once_one_per_line():
    raw = changed(prod_raw(), ("server", "ctxSize"), DELETE)
    raw = changed(raw, ("server", "port"), 0)
    raw = changed(raw, ("llamaCpp", "source", "commit"), "main")
    raw = changed(raw, ("model", "shards", 0, "sha256"), "nope")
    with pytest.raises(ConfigError) as error:
        parse(raw)
    keys = [problem.key for problem in error.value.problems]
    assert keys == ["spear-fleet:llamaCpp.source.commit", "spear-fleet:model.shards[0].sha256",
                    "spear-fleet:server.ctxSize", "spear-fleet:server.port"]
    assert str(error.value).splitlines()[1:] == [str(problem) for problem in error.value.problems]


def test_config_error_is_a_pulumi_run_error():
    # RunError: Pulumi prints the message without a Python traceback.
    assert issubclass(ConfigError, pulumi.RunError)


def test_prod_parses_to_the_seed_profile():
    cfg = parse(prod_raw())
    assert cfg.inference_host.ssh.host == "reds.internal"
    assert cfg.inference_host.ssh.port == 22
    assert cfg.inference_host.runtime_dir == "/opt/spear"
    assert cfg.inference_host.backend == "reds"
    assert cfg.client_port == 8082
    assert cfg.ssh_private_key == DUMMY_KEY and cfg.ssh_private_key_path is None
    assert cfg.llama_cpp.source == GitSource("https://github.com/ggml-org/llama.cpp.git",
                                             "aa6192d38defc9a5d9fb2987413f71b18f214270")
    assert cfg.llama_cpp.cmake_flags == (
        "-DGGML_CUDA=ON", "-DGGML_NATIVE=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF",
        "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
        "-DLLAMA_OPENSSL=OFF")
    model = cfg.model
    assert (model.arch, model.native_ctx, model.moe, model.adapter) == ("qwen3next", 262144, True, None)
    assert [shard.name for shard in model.shards] == [
        f"Qwen3-Coder-Next-Q8_0-0000{i}-of-00004.gguf" for i in range(1, 5)]
    assert round(sum(shard.size for shard in model.shards) / 2**30) == 79
    server = cfg.server
    assert (server.ctx_size, server.host, server.port, server.threads, server.gpu_layers,
            server.cpu_moe, server.parallel) == (524288, "127.0.0.1", 8010, 16, 99, 0, 1)


def test_dev_parses_with_moe_offload_and_no_yarn():
    cfg = parse({**stack_raw("dev"), "sshPrivateKey": DUMMY_KEY})
    assert cfg.llama_cpp.profile == "gpu"
    assert cfg.model.moe and cfg.server.cpu_moe == 40
    assert cfg.server.ctx_size <= cfg.model.native_ctx


def test_local_parses_with_archive_source_and_key_file():
    cfg = parse(stack_raw("local"))
    home = os.path.expanduser("~")
    assert cfg.inference_host.ssh == stack_config.SshTarget("127.0.0.1", 2222, "root")
    assert cfg.inference_host.ssh.is_loopback
    assert cfg.ssh_private_key is None
    assert cfg.ssh_private_key_path == f"{home}/.cache/spear-fleet/hosts/local/id_ed25519"
    source = cfg.llama_cpp.source
    assert isinstance(source, ArchiveSource)
    assert source.archive == f"{home}/.cache/spear-fleet/sources/llama_cpp_python-0.3.36.tar.gz"
    assert (source.sha256, source.subdir) == (llama_source.ARCHIVE_SHA256, llama_source.SUBDIR)
    assert cfg.llama_cpp.cmake_flags[0] == "-DGGML_CUDA=OFF"
    assert (cfg.model.arch, cfg.server.ctx_size, cfg.server.port, cfg.server.threads) == (
        "llama", 512, 8010, 2)


def test_defaults():
    raw = prod_raw()
    raw["inferenceHost"] = {"ssh": {"host": "gpu1"}}
    raw["server"] = {"ctxSize": 4096}
    del raw["backends"]
    raw["model"] = changed(raw["model"], ("moe",), DELETE)
    cfg = parse(raw)
    assert cfg.inference_host == stack_config.InferenceHost(
        stack_config.SshTarget("gpu1", 22, "root"), "/opt/spear", "reds")
    assert cfg.server == stack_config.Server(4096, "127.0.0.1", 8080, None, None, None, 1)
    assert cfg.backends == stack_config.Backends(8080, 8081, 8082)
    assert cfg.model.moe is False


def test_extra_cmake_flags_follow_the_profile():
    cfg = parse(changed(prod_raw(), ("llamaCpp", "extraCmakeFlags"), ["-DCMAKE_CUDA_ARCHITECTURES=90"]))
    assert cfg.llama_cpp.cmake_flags[-1] == "-DCMAKE_CUDA_ARCHITECTURES=90"
    assert cfg.llama_cpp.cmake_flags[:-1] == stack_config.PROFILE_CMAKE_FLAGS["gpu"]


def test_server_port_may_equal_a_client_port_on_a_remote_host():
    cfg = parse(changed(prod_raw(), ("server", "port"), 8082))
    assert cfg.server.port == cfg.client_port == 8082


def test_adapter_and_hash_normalisation():
    raw = changed(prod_raw(), ("model", "adapter"), "coder-lora.gguf")
    raw = changed(raw, ("model", "shards", 0, "sha256"), "AB" * 32)
    cfg = parse(raw)
    assert cfg.model.adapter == "coder-lora.gguf"
    assert cfg.model.shards[0].sha256 == "ab" * 32


# ---------------------------------------------------------------------------------------------
# load(): through the Pulumi runtime, with mocks counting the resources registered


@pytest.fixture
def mocks():
    mocks = RecordingMocks()
    pulumi.runtime.set_mocks(mocks, project="spear-fleet", stack="test")
    yield mocks
    pulumi.runtime.set_all_config({}, [])


def run_program(config: dict[str, str], secret_keys: list[str]):
    """load() and then one resource, the way __main__ starts; returns the loaded config."""
    pulumi.runtime.set_all_config(config, secret_keys)
    loaded = []

    @pulumi.runtime.test
    def program():
        cfg = stack_config.load()
        loaded.append(cfg)
        pulumi.CustomResource("spear:test:Probe", "probe", {})
        return cfg.ssh_private_key.apply(lambda key: loaded.append(key))

    program()
    return loaded


SECRET = ["spear-fleet:sshPrivateKey"]


def test_load_good_config_registers_the_program_resources(mocks):
    loaded = run_program(engine_config(prod_raw()), SECRET)
    assert list(mocks.resources) == ["probe"]
    cfg, key = loaded
    assert key == DUMMY_KEY
    assert cfg.server.ctx_size == 524288


def test_load_wraps_a_key_file_as_secret(mocks, tmp_path):
    key_file = tmp_path / "id_ed25519"
    key_file.write_text(DUMMY_KEY)
    raw = {**stack_raw("local"), "sshPrivateKeyPath": str(key_file)}
    pulumi.runtime.set_all_config(engine_config(raw), [])
    seen = {}

    @pulumi.runtime.test
    def program():
        cfg = stack_config.load()
        return pulumi.Output.all(cfg.ssh_private_key.is_secret(), cfg.ssh_private_key).apply(
            lambda args: seen.update(secret=args[0], key=args[1]))

    program()
    assert seen == {"secret": True, "key": DUMMY_KEY}


@pytest.mark.parametrize("config,secret_keys,key", [
    (engine_config(changed(prod_raw(), ("server", "ctxSize"), "abc")), SECRET, "server.ctxSize"),
    (engine_config(changed(prod_raw(), ("server", "ctxSize"), DELETE)), SECRET, "server.ctxSize"),
    (engine_config(changed(prod_raw(), ("llamaCpp", "source", "commit"), "main")), SECRET,
     "llamaCpp.source.commit"),
    ({**engine_config(prod_raw()), "spear-fleet:server": "{not json"}, SECRET, "server"),
    ({**engine_config(prod_raw()), "spear-fleet:gatewayKey": "x"}, SECRET, "gatewayKey"),
    (engine_config(prod_raw()), [], "sshPrivateKey"),  # set without --secret
    (engine_config({**stack_raw("local"), "sshPrivateKeyPath": "/nonexistent/id_ed25519"}), [],
     "sshPrivateKeyPath"),
], ids=["ctx-not-int", "ctx-missing", "commit-branch", "object-not-json", "unknown-top-key",
        "key-not-secret", "key-file-missing"])
def test_load_bad_config_registers_zero_resources(mocks, config, secret_keys, key):
    with pytest.raises(ConfigError) as error:
        run_program(config, secret_keys)
    problem_line(error.value, key)
    assert list(mocks.resources) == []
