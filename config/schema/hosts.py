"""`inferenceHosts` and `sshPrivateKeys`: the fleet's inference hosts, by name.

Each host has its own SSH target, runtime folder, llama.cpp source, model and server settings,
and its own SSH key: a key file (`ssh.privateKeyPath`) or a secret in `sshPrivateKeys.<name>`.
Ports and SSH targets are then checked across the whole fleet: every host on a loopback
address is this machine, and shares its ports with the others and with the client's tunnels.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any

from config.checker import (FILE_NAME, FILE_NAME_TEXT, LOCATION_TEXT, MISSING, Checker,
                            expand_location, ip_address, relative_subdir)
from config.options import (BOOL, PORT, SECRET, Choice, Either, Int, ListOf, Named, Obj, Opt,
                            Raw, Text, pattern)
from config.schema.common import BACKEND, RUNTIME_DIR, port_backend, ssh_obj, ssh_target
from config.types import (PROFILE_CMAKE_FLAGS, ArchiveSource, Backend, GitSource,
                          InferenceHost, LlamaCpp, Model, Server, Shard)
from spear.rules import (COMMIT_TEXT, SHA256_TEXT, THIS_MACHINE, is_commit, is_sha256,
                         port_clashes)

_SHA256 = Text(lambda v: v.lower() if is_sha256(v) else None, SHA256_TEXT)  # as sha256sum prints
_LOCATION = Text(expand_location, LOCATION_TEXT)
_SOURCE = Either({
    "git": Obj({"git": Opt(pattern(re.compile(r"[^\s-]\S*"), "a git URL or path"),
                           "llama.cpp's repository (no whitespace, not an option to git)"),
                "commit": Opt(Text(lambda v: v if is_commit(v) else None, COMMIT_TEXT),
                              "the commit built")}),
    "archive": Obj({"archive": Opt(_LOCATION, "a source archive: a local path or http(s) URL"),
                    "sha256": Opt(_SHA256, "the archive's digest"),
                    "subdir": Opt(Text(relative_subdir, "a relative path inside the archive,"
                                       " without '..'"), "the llama.cpp tree inside it",
                                  default=".")}),
}, "either {git, commit} or {archive, sha256, subdir}")
_SHARD = Obj({
    "name": Opt(pattern(FILE_NAME, FILE_NAME_TEXT), "its file name under <runtime>/models/gguf/"),
    "size": Opt(Int(1), "its size in bytes", why="required: the file size in bytes"),
    "sha256": Opt(_SHA256, "its digest"),
    "source": Opt(_LOCATION, "where it is fetched from; left out: already on the host",
                  default=None),
})
_SERVER_INT = Int(0)
HOST = Obj({
    "ssh": Opt(ssh_obj("a host name, ~/.ssh/config alias or IP address"), "how spear-fleet logs in"),
    "runtimeDir": Opt(RUNTIME_DIR, "spear-fleet's folder on the host", default="/opt/spear"),
    "backend": Opt(BACKEND, "the client backend whose port reaches this server", default="reds"),
    "llamaCpp": Opt(Obj({
        "source": Opt(_SOURCE, "where llama.cpp's source comes from"),
        "profile": Opt(Choice(tuple(PROFILE_CMAKE_FLAGS)), "the build profile"),
        "extraCmakeFlags": Opt(ListOf(pattern(re.compile(r"-D[A-Za-z_][A-Za-z0-9_]*(:[A-Z]+)?=\S*"),
                                              "a -DNAME=value (or -DNAME:TYPE=value) string"),
                                      "a list of -DNAME=value strings"),
                               "cmake flags after the profile's (a later -D wins)", default=()),
    }), "the llama.cpp build"),
    "model": Opt(Obj({
        "arch": Opt(pattern(re.compile(r"[a-z0-9_]+"), "a llama.cpp architecture name"
                            " ([a-z0-9_]+, e.g. qwen3next, llama)"),
                    "llama.cpp's architecture name, the prefix of its GGUF keys"),
        "nativeCtx": Opt(Int(1), "the context length the model was trained at",
                         why="required: the context length it was trained at"),
        "moe": Opt(BOOL, "a mixture-of-experts model", default=False),
        "shards": Opt(ListOf(_SHARD, "a non-empty list of {name, size, sha256, source?}",
                             non_empty=True), "the GGUF files, in order"),
        "adapter": Opt(Raw({"type": "string"}), "a LoRA file under <runtime>/models/lora/, or"
                       " none for the base model", default=None),
    }), "the model it serves"),
    "server": Opt(Obj({
        "ctxSize": Opt(Int(1), "the context window llama-server allocates",
                       why="no default: state it in the stack"),
        "host": Opt(Text(ip_address, "an IP address"), "where it listens", default="127.0.0.1"),
        "port": Opt(PORT, "its port on the host", default=8080),
        "threads": Opt(Int(1), "CPU threads (left out: llama-server's default)", default=None),
        "gpuLayers": Opt(_SERVER_INT, "layers on the GPU (left out: llama-server's default)",
                         default=None),
        "cpuMoe": Opt(_SERVER_INT, "MoE layers kept on the CPU (only with model.moe)",
                      default=None),
        "parallel": Opt(Int(1), "requests served at once", default=1),
    }), "llama-server's settings"),
})
_HOSTS = Named(HOST, "an inference host")
OPTIONS = {
    "inferenceHosts": Opt(_HOSTS, "the inference hosts, by name"),
    "sshPrivateKeys": Opt(Raw({"type": "object", "additionalProperties": SECRET.schema()}),
                          "a secret private key per host, pod or endpoint name", default=None),
}
_ADAPTER = Text(lambda v: v if FILE_NAME.fullmatch(v) else None,
                FILE_NAME_TEXT + " under <runtime>/models/lora/, or none for the base model")


def parse(check: Checker, value: Any, keys_value: Any,
          backends: Mapping[str, Backend] | None,
          other_key_owners: Mapping[str, Collection[str]] | None = None) -> dict[str, InferenceHost]:
    """other_key_owners: besides the inference hosts, what else may have a key in
    sshPrivateKeys, by kind (e.g. {"pods": [...], "REDS endpoints": [...]})."""
    hosts = _HOSTS.entries(check, "inferenceHosts", value)
    secret_keys = _secret_keys(check, keys_value)
    if hosts is None:
        return {}
    owners = {kind: names for kind, names in (other_key_owners or {}).items() if names}
    other_names = [name for names in owners.values() for name in names]
    if secret_keys is not None:
        for name in sorted(set(secret_keys) - set(hosts) - set(other_names)):
            check.report(f"sshPrivateKeys.{name}", "a key for an undeclared host",
                         "one of the inferenceHosts" + "".join(f" or {kind}" for kind in owners)
                         + ": " + ", ".join([*hosts, *other_names]))
    parsed = {}
    for name, item in hosts.items():
        host = _host(check, name, item, (secret_keys or {}).get(name, MISSING), backends)
        if host is not None:
            parsed[name] = host
    if backends is not None and len(parsed) == len(hosts):
        _check_fleet(check, parsed, backends)
    return parsed


def _secret_keys(check: Checker, value: Any) -> dict[str, Any] | None:
    if value is MISSING:
        return {}
    if not isinstance(value, Mapping):
        # Describe the secret, never echo it.
        check.report("sshPrivateKeys", f"a secret of type {type(value).__name__}",
                     "a map of inference host name -> private key")
        return None
    return dict(value)


def _host(check: Checker, name: str, value: Any, secret_key: Any,
          backends: Mapping[str, Backend] | None) -> InferenceHost | None:
    start = check.mark()
    prefix = f"inferenceHosts.{name}"
    host = HOST.read(check, prefix, value)
    if host is None:
        return None
    ssh = ssh_target(check, prefix, name, host["ssh"], secret_key)
    backend = port_backend(check, f"{prefix}.backend", host["backend"], backends)
    llama, model, server = host["llamaCpp"], host["model"], host["server"]
    adapter = model and model["adapter"]
    if adapter not in (None, "none"):
        adapter = _ADAPTER.read(check, f"{prefix}.model.adapter", adapter)
    if server and model and server["cpuMoe"] is not None and model["moe"] is False:
        check.fail(f"{prefix}.server.cpuMoe", server["cpuMoe"],
                   "only with model.moe: true (it keeps mixture-of-experts layers on the CPU)")
    names = [shard["name"] for shard in (model and model["shards"]) or () if shard]
    for i, shard_name in enumerate(names):
        if shard_name is not None and shard_name in names[:i]:
            check.fail(f"{prefix}.model.shards[{i}].name", shard_name, "a name no other shard has")
    if not check.clean_since(start):
        return None
    source_kind, source = llama["source"]
    return InferenceHost(
        name=name, ssh=ssh, runtime_dir=host["runtimeDir"], backend=backend,
        llama_cpp=LlamaCpp(GitSource(source["git"], source["commit"]) if source_kind == "git"
                           else ArchiveSource(source["archive"], source["sha256"], source["subdir"]),
                           llama["profile"], tuple(llama["extraCmakeFlags"])),
        model=Model(arch=model["arch"], native_ctx=model["nativeCtx"], moe=model["moe"],
                    shards=tuple(Shard(name=s["name"], size=s["size"], sha256=s["sha256"],
                                       source=s["source"]) for s in model["shards"]),
                    adapter=None if adapter == "none" else adapter),
        server=Server(ctx_size=server["ctxSize"], host=server["host"], port=server["port"],
                      threads=server["threads"], gpu_layers=server["gpuLayers"],
                      cpu_moe=server["cpuMoe"], parallel=server["parallel"]))


# --------------------------------------------------------------------------------------------
# Across the fleet


def _check_fleet(check: Checker, hosts: dict[str, InferenceHost],
                 backends: Mapping[str, Backend]) -> None:
    """One host per SSH target; no two things bind one port on one machine.

    A host reached on a loopback address is this machine: its server and its sshd take this
    machine's ports, as do the other loopback hosts' and the client ports of the backends
    (the seed keeps those free so every backend can be up at once).
    """
    targets: dict[str, str] = {}
    for name, host in hosts.items():
        if host.ssh.address in targets:
            check.fail(f"inferenceHosts.{name}.ssh", host.ssh.address,
                       f"an SSH target other than inferenceHosts.{targets[host.ssh.address]}'s:"
                       " one host runs one spear-inference.service and one runtime folder")
        targets.setdefault(host.ssh.address, name)

    binds = [(THIS_MACHINE, backend.port,
              f"backends.{backend.name} (the client port of backend {backend.name})")
             for backend in backends.values() if backend.port is not None]
    for name, host in hosts.items():
        prefix = f"inferenceHosts.{name}"
        binds += [(host.ssh.host, host.ssh.port, f"{prefix}.ssh.port (the SSH port)"),
                  (host.ssh.host, host.server.port, f"{prefix}.server.port")]
    for (machine, port), users in port_clashes(binds).items():
        servers = [user for user in users if user.endswith(".server.port")]
        for server_key in servers:
            others = list(dict.fromkeys(user for user in users if user != server_key))
            if others:
                check.fail(server_key.split(" ")[0], port,
                           f"a port other than {', '.join(others)}, since they share {machine}"
                           + (" (the host is reached on a loopback address)"
                              if machine == THIS_MACHINE else ""))
