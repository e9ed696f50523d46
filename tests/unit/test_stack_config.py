"""config: every bad value is refused with the full key, what was given and what is allowed,
all problems at once, before any resource is registered; the real stacks parse."""

from __future__ import annotations

import copy
import os
from typing import Any

import pulumi
import pytest

from config import types
from config.checker import ConfigError
from config.load import StackConfigError, load
from config.load import parse_stack
from config.schema.backends import SEED_BACKENDS
from config.types import ArchiveSource, GitSource, InlineKey, KeyFile
from localhosts.hosts import llama_source
from tests.support.config_cases import (DELETE, allowed_for, changed, problem_line,
                                        repeated_cases, run_program)
from tests.support.stack_files import (DUMMY_KEY, PROD_HOST, encrypted_keys, engine_config, prod_raw,
                                       stack_raw)

HOST = PROD_HOST


def archive_raw(**source: Any) -> dict[str, Any]:
    base = {"archive": "/srv/llama.tar.gz", "sha256": "ab" * 32, "subdir": "llama.cpp"}
    return changed(prod_raw(), (*HOST, "llamaCpp", "source"), {**base, **source})


def loopback_raw() -> dict[str, Any]:
    return changed(prod_raw(), (*HOST, "ssh", "host"), "127.0.0.1")


def two_hosts(ssh: dict[str, Any], server_port: int, first: dict[str, Any] | None = None
              ) -> dict[str, Any]:
    """prod with a second host `pilot` (a copy of reds) at this SSH target and server port."""
    raw = prod_raw()
    reds = raw["inferenceHosts"]["reds"]
    if first:
        reds["ssh"].update(first)
    pilot = copy.deepcopy(reds)
    pilot["ssh"].update(ssh)
    pilot["server"]["port"] = server_port
    raw["inferenceHosts"]["pilot"] = pilot
    raw["sshPrivateKeys"]["pilot"] = DUMMY_KEY
    return raw


# (id, config, full key without the namespace, a fragment of what is allowed)
BAD = [
    ("ctx-missing", changed(prod_raw(), (*HOST, "server", "ctxSize"), DELETE),
     "inferenceHosts.reds.server.ctxSize", "no default: state it in the stack"),
    ("ctx-not-int", changed(prod_raw(), (*HOST, "server", "ctxSize"), "abc"),
     "inferenceHosts.reds.server.ctxSize", "an integer >= 1"),
    ("ctx-zero", changed(prod_raw(), (*HOST, "server", "ctxSize"), 0), "inferenceHosts.reds.server.ctxSize", "an integer >= 1"),
    ("ctx-bool", changed(prod_raw(), (*HOST, "server", "ctxSize"), True), "inferenceHosts.reds.server.ctxSize", "an integer >= 1"),
    ("ctx-float", changed(prod_raw(), (*HOST, "server", "ctxSize"), 5.5), "inferenceHosts.reds.server.ctxSize", "an integer >= 1"),
    ("port-zero", changed(prod_raw(), (*HOST, "server", "port"), 0), "inferenceHosts.reds.server.port", "an integer 1-65535"),
    ("port-too-big", changed(prod_raw(), (*HOST, "server", "port"), 70000), "inferenceHosts.reds.server.port", "an integer 1-65535"),
    ("host-name", changed(prod_raw(), (*HOST, "server", "host"), "localhost"), "inferenceHosts.reds.server.host", "an IP address"),
    ("threads-zero", changed(prod_raw(), (*HOST, "server", "threads"), 0), "inferenceHosts.reds.server.threads", "an integer >= 1"),
    ("ngl-negative", changed(prod_raw(), (*HOST, "server", "gpuLayers"), -1),
     "inferenceHosts.reds.server.gpuLayers", "an integer >= 0"),
    ("cpumoe-negative", changed(prod_raw(), (*HOST, "server", "cpuMoe"), -3), "inferenceHosts.reds.server.cpuMoe", "an integer >= 0"),
    ("cpumoe-dense", changed(changed(prod_raw(), (*HOST, "model", "moe"), False), (*HOST, "server", "cpuMoe"), 4),
     "inferenceHosts.reds.server.cpuMoe", "only with model.moe: true"),
    ("parallel-zero", changed(prod_raw(), (*HOST, "server", "parallel"), 0), "inferenceHosts.reds.server.parallel", "an integer >= 1"),
    ("server-unknown", changed(prod_raw(), (*HOST, "server", "ctx"), 4096), "inferenceHosts.reds.server.ctx", "one of ctxSize, host"),
    ("server-not-object", changed(prod_raw(), (*HOST, "server"), "524288"), "inferenceHosts.reds.server", "an object with keys ctxSize"),
    ("ssh-host-missing", changed(prod_raw(), (*HOST, "ssh", "host"), DELETE),
     "inferenceHosts.reds.ssh.host", "a host name"),
    ("ssh-host-space", changed(prod_raw(), (*HOST, "ssh", "host"), "reds internal"),
     "inferenceHosts.reds.ssh.host", "a host name"),
    ("ssh-port", changed(prod_raw(), (*HOST, "ssh", "port"), 0),
     "inferenceHosts.reds.ssh.port", "an integer 1-65535"),
    ("ssh-user", changed(prod_raw(), (*HOST, "ssh", "user"), "bad user"),
     "inferenceHosts.reds.ssh.user", "a user name"),
    ("ssh-unknown", changed(prod_raw(), (*HOST, "ssh", "key"), "x"),
     "inferenceHosts.reds.ssh.key", "one of host, port, user, privateKeyPath"),
    ("runtime-relative", changed(prod_raw(), (*HOST, "runtimeDir"), "opt/spear"),
     "inferenceHosts.reds.runtimeDir", "an absolute path"),
    ("runtime-root", changed(prod_raw(), (*HOST, "runtimeDir"), "/"),
     "inferenceHosts.reds.runtimeDir", "an absolute path other than /"),
    ("backend-unknown", changed(prod_raw(), (*HOST, "backend"), "anthropic"),
     "inferenceHosts.reds.backend", "one of local, remote, reds"),
    ("backend-undeclared", changed(prod_raw(), (*HOST, "backend"), "lab"),
     "inferenceHosts.reds.backend", "one of local, remote, reds"),
    ("host-not-object", changed(prod_raw(), HOST, "reds.internal"),
     "inferenceHosts.reds", "an object with keys ssh, runtimeDir, backend, llamaCpp"),
    ("commit-branch", changed(prod_raw(), (*HOST, "llamaCpp", "source", "commit"), "master"),
     "inferenceHosts.reds.llamaCpp.source.commit", "a branch or tag name is refused"),
    ("commit-tag", changed(prod_raw(), (*HOST, "llamaCpp", "source", "commit"), "b6000"),
     "inferenceHosts.reds.llamaCpp.source.commit", "40 lowercase hex"),
    ("commit-upper", changed(prod_raw(), (*HOST, "llamaCpp", "source", "commit"), "AA6192D38DEFC9A5D9FB2987413F71B18F214270"),
     "inferenceHosts.reds.llamaCpp.source.commit", "40 lowercase hex"),
    ("commit-short", changed(prod_raw(), (*HOST, "llamaCpp", "source", "commit"), "aa6192d"),
     "inferenceHosts.reds.llamaCpp.source.commit", "40 lowercase hex"),
    ("commit-missing", changed(prod_raw(), (*HOST, "llamaCpp", "source", "commit"), DELETE),
     "inferenceHosts.reds.llamaCpp.source.commit", "40 lowercase hex"),
    ("git-and-archive", changed(prod_raw(), (*HOST, "llamaCpp", "source", "archive"), "/srv/x.tar.gz"),
     "inferenceHosts.reds.llamaCpp.source", "either {git, commit} or {archive, sha256, subdir}"),
    ("git-with-sha256", changed(prod_raw(), (*HOST, "llamaCpp", "source", "sha256"), "ab" * 32),
     "inferenceHosts.reds.llamaCpp.source.sha256", "one of git, commit"),
    ("archive-sha-short", archive_raw(sha256="abc123"), "inferenceHosts.reds.llamaCpp.source.sha256", "64 hex characters"),
    ("archive-relative", archive_raw(archive="sources/llama.tar.gz"),
     "inferenceHosts.reds.llamaCpp.source.archive", "an absolute local path"),
    ("archive-ftp", archive_raw(archive="ftp://example.org/llama.tar.gz"),
     "inferenceHosts.reds.llamaCpp.source.archive", "or an http(s) URL"),
    ("archive-subdir-up", archive_raw(subdir="../etc"), "inferenceHosts.reds.llamaCpp.source.subdir", "without '..'"),
    ("profile", changed(prod_raw(), (*HOST, "llamaCpp", "profile"), "cuda"), "inferenceHosts.reds.llamaCpp.profile", "one of gpu, cpu"),
    ("cmake-flag", changed(prod_raw(), (*HOST, "llamaCpp", "extraCmakeFlags"), ["GGML_CUDA=ON"]),
     "inferenceHosts.reds.llamaCpp.extraCmakeFlags[0]", "a -DNAME=value"),
    ("cmake-not-list", changed(prod_raw(), (*HOST, "llamaCpp", "extraCmakeFlags"), "-DX=1"),
     "inferenceHosts.reds.llamaCpp.extraCmakeFlags", "a list of -DNAME=value strings"),
    ("arch", changed(prod_raw(), (*HOST, "model", "arch"), "Qwen3-Next"), "inferenceHosts.reds.model.arch", "[a-z0-9_]+"),
    ("native-missing", changed(prod_raw(), (*HOST, "model", "nativeCtx"), DELETE),
     "inferenceHosts.reds.model.nativeCtx", "the context length it was trained at"),
    ("moe-string", changed(prod_raw(), (*HOST, "model", "moe"), "yes"), "inferenceHosts.reds.model.moe", "true or false"),
    ("shards-empty", changed(prod_raw(), (*HOST, "model", "shards"), []), "inferenceHosts.reds.model.shards", "a non-empty list"),
    ("shard-sha", changed(prod_raw(), (*HOST, "model", "shards", 1, "sha256"), "abc"),
     "inferenceHosts.reds.model.shards[1].sha256", "64 hex characters"),
    ("shard-name-path", changed(prod_raw(), (*HOST, "model", "shards", 0, "name"), "../x.gguf"),
     "inferenceHosts.reds.model.shards[0].name", "no '/'"),
    ("shard-size", changed(prod_raw(), (*HOST, "model", "shards", 2, "size"), 0),
     "inferenceHosts.reds.model.shards[2].size", "an integer >= 1"),
    ("shard-duplicate", changed(prod_raw(), (*HOST, "model", "shards", 3, "name"),
                                "Qwen3-Coder-Next-Q8_0-00001-of-00004.gguf"),
     "inferenceHosts.reds.model.shards[3].name", "a name no other shard has"),
    ("shard-source", changed(prod_raw(), (*HOST, "model", "shards", 0, "source"), "ftp://x/y.gguf"),
     "inferenceHosts.reds.model.shards[0].source", "an http(s) URL"),
    ("adapter-path", changed(prod_raw(), (*HOST, "model", "adapter"), "lora/x.gguf"),
     "inferenceHosts.reds.model.adapter", "or none for the base model"),
    ("backends-clash", changed(prod_raw(), ("backends", "remote"), {"port": 8080}),
     "backends.remote.port", "a port other than backends.local (8080)"),
    ("backends-port", changed(prod_raw(), ("backends", "reds"), {"port": 0}),
     "backends.reds.port", "an integer 1-65535"),
    ("backends-old-shape", changed(prod_raw(), ("backends", "reds"), 8082),
     "backends.reds", "an object with keys kind, port"),
    ("backends-kind", changed(prod_raw(), ("backends", "lab"), {"kind": "tunnel", "port": 8083}),
     "backends.lab.kind", "one of port, api"),
    ("backends-without-port", changed(prod_raw(), ("backends", "lab"), {"kind": "port"}),
     "backends.lab.port", "an integer 1-65535 (required)"),
    ("backends-api-with-port", changed(prod_raw(), ("backends", "anthropic"), {"port": 8083}),
     "backends.anthropic.port", "no port: a backend of kind api is a hosted API"),
    ("backends-bad-name", changed(prod_raw(), ("backends", "Lab Box"), {"port": 8083}),
     "backends.Lab Box", "a name of lowercase letters"),
    ("loopback-backend-port", changed(loopback_raw(), (*HOST, "server", "port"), 8082),
     "inferenceHosts.reds.server.port", "a port other than backends.reds"),
    ("loopback-other-backend-port", changed(loopback_raw(), (*HOST, "server", "port"), 8081),
     "inferenceHosts.reds.server.port", "a port other than backends.remote"),
    ("loopback-ssh-port", changed(loopback_raw(), (*HOST, "server", "port"), 22),
     "inferenceHosts.reds.server.port", "a port other than inferenceHosts.reds.ssh.port"),
    ("top-unknown", changed(prod_raw(), ("serverr",), {}), "serverr",
     "one of backends, inferenceHosts, sshPrivateKeys"),
    ("old-single-host-key", changed(prod_raw(), ("inferenceHost",), {}), "inferenceHost",
     "one of backends, inferenceHosts"),
    ("hosts-missing", changed(prod_raw(), ("inferenceHosts",), DELETE),
     "inferenceHosts", "a non-empty map of name -> an inference host (required)"),
    ("hosts-empty", changed(prod_raw(), ("inferenceHosts",), {}),
     "inferenceHosts", "a non-empty map of name -> an inference host"),
    ("host-unknown-key", changed(prod_raw(), (*HOST, "serverr"), {}),
     "inferenceHosts.reds.serverr", "one of ssh, runtimeDir, backend, llamaCpp, model, server"),
    ("host-name-unknown-shape", changed(prod_raw(), ("inferenceHosts", "Reds_1"), {}),
     "inferenceHosts.Reds_1", "a name of lowercase letters, digits and '-'"),
    ("key-and-path", changed(prod_raw(), (*HOST, "ssh", "privateKeyPath"), "~/.ssh/id"),
     "inferenceHosts.reds.ssh.privateKeyPath", "exactly one of inferenceHosts.reds.ssh.privateKeyPath"),
    ("key-missing-for-host", changed(prod_raw(), ("sshPrivateKeys", "reds"), DELETE),
     "sshPrivateKeys.reds", "exactly one of inferenceHosts.reds.ssh.privateKeyPath"),
    ("key-not-a-key", changed(prod_raw(), ("sshPrivateKeys", "reds"), "hunter2-secret"),
     "sshPrivateKeys.reds", "a private key (-----BEGIN"),
    ("key-for-undeclared-host", changed(prod_raw(), ("sshPrivateKeys", "pilot"), DUMMY_KEY),
     "sshPrivateKeys.pilot", "one of the inferenceHosts: reds"),
    ("keys-not-a-map", changed(prod_raw(), ("sshPrivateKeys",), "hunter2-secret"),
     "sshPrivateKeys", "a map of inference host name -> private key"),
    ("fleet-same-ssh-target", two_hosts({}, 8011),
     "inferenceHosts.pilot.ssh", "an SSH target other than inferenceHosts.reds's"),
    ("fleet-port-clash-on-this-machine",
     two_hosts({"host": "127.0.0.1", "port": 2223}, 8010, first={"host": "127.0.0.1", "port": 2222}),
     "inferenceHosts.pilot.server.port", "a port other than inferenceHosts.reds.server.port"),
    ("fleet-port-clash-on-one-remote-machine", two_hosts({"port": 2200}, 8010),
     "inferenceHosts.pilot.server.port", "since they share reds.internal"),
    ("fleet-server-on-another-hosts-ssh-port",
     two_hosts({"host": "127.0.0.1", "port": 2223}, 2222, first={"host": "127.0.0.1", "port": 2222}),
     "inferenceHosts.pilot.server.port", "a port other than inferenceHosts.reds.ssh.port"),
]


@pytest.mark.parametrize("raw,key,allowed", [case[1:] for case in BAD], ids=[case[0] for case in BAD])
def test_bad_value_is_refused_naming_key_and_allowed(mocks, raw, key, allowed):
    assert allowed in allowed_for(mocks, raw, key, SECRET)


def test_no_two_bad_cases_share_an_id_or_a_refusal():
    assert repeated_cases(BAD) == []


def test_message_shows_what_was_given():
    with pytest.raises(ConfigError) as error:
        parse_stack(changed(prod_raw(), (*HOST, "server", "ctxSize"), "abc"))
    assert problem_line(error.value, "inferenceHosts.reds.server.ctxSize") == (
        "spear-fleet:inferenceHosts.reds.server.ctxSize: got 'abc'; allowed: an integer >= 1")


def test_secret_is_never_echoed():
    with pytest.raises(ConfigError) as error:
        parse_stack(changed(prod_raw(), ("sshPrivateKeys", "reds"), "hunter2-secret"))
    assert "hunter2" not in str(error.value)
    assert "hunter2" not in repr(parse_stack(prod_raw()))


def test_all_problems_are_reported_at_once_one_per_line():
    raw = changed(prod_raw(), (*HOST, "server", "ctxSize"), DELETE)
    raw = changed(raw, (*HOST, "server", "port"), 0)
    raw = changed(raw, (*HOST, "llamaCpp", "source", "commit"), "main")
    raw = changed(raw, (*HOST, "model", "shards", 0, "sha256"), "nope")
    raw = changed(raw, ("backends", "lab"), {"kind": "port"})
    with pytest.raises(ConfigError) as error:
        parse_stack(raw)
    keys = [problem.key for problem in error.value.problems]
    assert keys == ["spear-fleet:backends.lab.port",
                    "spear-fleet:inferenceHosts.reds.llamaCpp.source.commit",
                    "spear-fleet:inferenceHosts.reds.model.shards[0].sha256",
                    "spear-fleet:inferenceHosts.reds.server.ctxSize",
                    "spear-fleet:inferenceHosts.reds.server.port"]
    assert str(error.value).splitlines()[1:] == [str(problem) for problem in error.value.problems]


def test_the_error_pulumi_sees_is_a_run_error():
    # RunError: Pulumi prints the message without a Python traceback.
    assert issubclass(StackConfigError, pulumi.RunError)


def test_prod_parses_to_the_seed_profile():
    cfg = parse_stack(prod_raw())
    assert list(cfg.inference_hosts) == ["reds"]
    host = cfg.inference_hosts["reds"]
    assert (host.ssh.host, host.ssh.port, host.ssh.user) == ("reds.internal", 22, "root")
    assert host.ssh.key == InlineKey(DUMMY_KEY)
    assert host.runtime_dir == "/opt/spear"
    assert host.backend == SEED_BACKENDS["reds"] and host.backend.port == 8082
    assert host.llama_cpp.source == GitSource("https://github.com/ggml-org/llama.cpp.git",
                                              "aa6192d38defc9a5d9fb2987413f71b18f214270")
    assert host.llama_cpp.cmake_flags == (
        "-DGGML_CUDA=ON", "-DGGML_NATIVE=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF",
        "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
        "-DLLAMA_OPENSSL=OFF")
    model = host.model
    assert (model.arch, model.native_ctx, model.moe, model.adapter) == ("qwen3next", 262144, True, None)
    assert [shard.name for shard in model.shards] == [
        f"Qwen3-Coder-Next-Q8_0-0000{i}-of-00004.gguf" for i in range(1, 5)]
    assert round(sum(shard.size for shard in model.shards) / 2**30) == 79
    server = host.server
    assert (server.ctx_size, server.host, server.port, server.threads, server.gpu_layers,
            server.cpu_moe, server.parallel) == (524288, "127.0.0.1", 8010, 16, 99, 0, 1)


def test_prod_declares_the_seeds_four_backends():
    backends = parse_stack(prod_raw()).backends
    assert {name: (b.kind, b.port) for name, b in backends.items()} == {
        "local": ("port", 8080), "remote": ("port", 8081), "reds": ("port", 8082),
        "anthropic": ("api", None)}


def test_a_new_backend_is_one_entry():
    cfg = parse_stack(changed(prod_raw(), ("backends", "lab"), {"port": 8083}))
    assert cfg.backends["lab"] == types.Backend(name="lab", kind="port", port=8083,
                                                what="127.0.0.1:8083 on the client")
    host = parse_stack(changed(changed(prod_raw(), ("backends", "lab"), {"port": 8083}),
                         (*HOST, "backend"), "lab")).inference_hosts["reds"]
    assert host.backend.port == 8083


def test_dev_parses_with_moe_offload_and_no_yarn():
    raw = stack_raw("dev")
    raw["sshPrivateKeys"] = {"pilot": DUMMY_KEY}
    host = parse_stack(raw).inference_hosts["pilot"]
    assert host.llama_cpp.profile == "gpu"
    assert host.model.moe and host.server.cpu_moe == 40
    assert host.server.ctx_size <= host.model.native_ctx


def test_local_parses_with_archive_source_and_key_file():
    host = parse_stack(stack_raw("local")).inference_hosts["local"]
    home = os.path.expanduser("~")
    assert host.ssh == types.SshTarget(
        host="127.0.0.1", port=2222, user="root",
        key=KeyFile(f"{home}/.cache/spear-fleet/hosts/local/id_ed25519"))
    assert host.ssh.is_loopback
    source = host.llama_cpp.source
    assert isinstance(source, ArchiveSource)
    assert source.archive == f"{home}/.cache/spear-fleet/sources/llama_cpp_python-0.3.36.tar.gz"
    assert (source.sha256, source.subdir) == (llama_source.ARCHIVE_SHA256, llama_source.SUBDIR)
    assert host.llama_cpp.cmake_flags[0] == "-DGGML_CUDA=OFF"
    assert (host.model.arch, host.server.ctx_size, host.server.port, host.server.threads) == (
        "llama", 32768, 8010, 2)


def test_defaults():
    raw = prod_raw()
    raw["inferenceHosts"]["reds"].update(ssh={"host": "gpu1"}, server={"ctxSize": 4096})
    del raw["inferenceHosts"]["reds"]["runtimeDir"], raw["inferenceHosts"]["reds"]["backend"]
    del raw["backends"], raw["inferenceHosts"]["reds"]["model"]["moe"]
    cfg = parse_stack(raw)
    host = cfg.inference_hosts["reds"]
    assert host.ssh == types.SshTarget(host="gpu1", port=22, user="root", key=InlineKey(DUMMY_KEY))
    assert (host.runtime_dir, host.backend.name) == ("/opt/spear", "reds")
    assert host.server == types.Server(ctx_size=4096, host="127.0.0.1", port=8080, threads=None,
                                       gpu_layers=None, cpu_moe=None, parallel=1)
    assert cfg.backends == SEED_BACKENDS
    assert host.model.moe is False


def test_extra_cmake_flags_follow_the_profile():
    cfg = parse_stack(changed(prod_raw(), (*HOST, "llamaCpp", "extraCmakeFlags"),
                        ["-DCMAKE_CUDA_ARCHITECTURES=90"]))
    flags = cfg.inference_hosts["reds"].llama_cpp.cmake_flags
    assert flags[-1] == "-DCMAKE_CUDA_ARCHITECTURES=90"
    assert flags[:-1] == types.PROFILE_CMAKE_FLAGS["gpu"]


def test_server_port_may_equal_a_client_port_on_a_remote_host():
    host = parse_stack(changed(prod_raw(), (*HOST, "server", "port"), 8082)).inference_hosts["reds"]
    assert host.server.port == host.backend.port == 8082


def test_two_hosts_on_distinct_targets_and_ports_parse():
    raw = two_hosts({"host": "127.0.0.1", "port": 2223}, 8011, first={"host": "127.0.0.1", "port": 2222})
    cfg = parse_stack(raw)
    assert list(cfg.inference_hosts) == ["reds", "pilot"]
    assert cfg.inference_hosts["pilot"].ssh.address == "127.0.0.1:2223"


def test_two_remote_hosts_may_serve_the_same_port():
    cfg = parse_stack(two_hosts({"host": "pilot.internal"}, 8010))
    assert {h.server.port for h in cfg.inference_hosts.values()} == {8010}


def test_adapter_and_hash_normalisation():
    raw = changed(prod_raw(), (*HOST, "model", "adapter"), "coder-lora.gguf")
    raw = changed(raw, (*HOST, "model", "shards", 0, "sha256"), "AB" * 32)
    model = parse_stack(raw).inference_hosts["reds"].model
    assert model.adapter == "coder-lora.gguf"
    assert model.shards[0].sha256 == "ab" * 32


# ---------------------------------------------------------------------------------------------
# load(): through the Pulumi runtime, with mocks counting the resources registered


SECRET = ["spear-fleet:sshPrivateKeys"]


def test_load_good_config_registers_the_program_resources(mocks):
    loaded = run_program(engine_config(prod_raw()), [*SECRET, "spear-fleet:kubeconfig",
                                                     "spear-fleet:vllmApiKey"])
    assert mocks.registered == ["probe"]
    stack, key = loaded
    assert key == DUMMY_KEY
    assert stack.config.inference_hosts["reds"].server.ctx_size == 524288


def test_load_wraps_a_key_file_as_secret(mocks, tmp_path):
    key_file = tmp_path / "id_ed25519"
    key_file.write_text(DUMMY_KEY)
    raw = changed(stack_raw("local"), ("inferenceHosts", "local", "ssh", "privateKeyPath"),
                  str(key_file))
    # The gateway's key file too: on a fresh machine the local hosts' keys do not exist yet.
    raw = changed(raw, ("gateway", "ssh", "privateKeyPath"), str(key_file))
    pulumi.runtime.set_all_config(engine_config(raw), encrypted_keys("local"))
    seen = {}

    @pulumi.runtime.test
    def program():
        key = load().ssh_keys["local"]
        return pulumi.Output.all(key.is_secret(), key).apply(
            lambda args: seen.update(secret=args[0], key=args[1]))

    program()
    assert seen == {"secret": True, "key": DUMMY_KEY}


@pytest.mark.parametrize("config,secret_keys,key", [
    (engine_config(changed(prod_raw(), (*HOST, "server", "ctxSize"), "abc")), SECRET,
     "inferenceHosts.reds.server.ctxSize"),
    (engine_config(changed(prod_raw(), (*HOST, "server", "ctxSize"), DELETE)), SECRET,
     "inferenceHosts.reds.server.ctxSize"),
    (engine_config(changed(prod_raw(), (*HOST, "llamaCpp", "source", "commit"), "main")), SECRET,
     "inferenceHosts.reds.llamaCpp.source.commit"),
    ({**engine_config(prod_raw()), "spear-fleet:inferenceHosts": "{not json"}, SECRET,
     "inferenceHosts"),
    ({**engine_config(prod_raw()), "spear-fleet:gatewayKey": "x"}, SECRET, "gatewayKey"),
    (engine_config(prod_raw()), [], "sshPrivateKeys"),  # set without --secret
    (engine_config(changed(stack_raw("local"), ("inferenceHosts", "local", "ssh", "privateKeyPath"),
                           "/nonexistent/id_ed25519")), encrypted_keys("local"),
     "inferenceHosts.local.ssh.privateKeyPath"),
], ids=["ctx-not-int", "ctx-missing", "commit-branch", "object-not-json", "unknown-top-key",
        "keys-not-secret", "key-file-missing"])
def test_load_bad_config_registers_zero_resources(mocks, config, secret_keys, key):
    with pytest.raises(StackConfigError) as error:
        run_program(config, secret_keys)
    problem_line(error.value, key)
    assert mocks.registered == []


@pytest.mark.parametrize("stack,dry_run,refused", [
    ("prod", False, True), ("prod", True, False), ("local", False, False)])
def test_the_example_passphrase_deploys_only_the_local_stack(monkeypatch, stack, dry_run, refused):
    from spear.rules import EXAMPLE_PASSPHRASE, PASSPHRASE_ENV
    from tests.support.stack_files import RecordingMocks, engine_config, prod_raw
    monkeypatch.setenv(PASSPHRASE_ENV, EXAMPLE_PASSPHRASE)
    pulumi.runtime.set_mocks(RecordingMocks(), project="spear-fleet", stack=stack, preview=dry_run)
    pulumi.runtime.set_all_config(engine_config(prod_raw()), [
        "spear-fleet:sshPrivateKeys", "spear-fleet:kubeconfig", "spear-fleet:vllmApiKey"])
    try:
        if refused:
            with pytest.raises(StackConfigError) as error:
                load()
            assert str(error.value).splitlines()[1] == (
                "PULUMI_CONFIG_PASSPHRASE: got the public example passphrase; allowed: a"
                f" passphrase of your own for the {stack} stack (only local may use the example's)")
        else:
            assert load().config.inference_hosts
    finally:
        pulumi.runtime.set_all_config({}, [])
