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
                            absolute_dir, expand_location, get, ip_address, relative_subdir)
from config.schema.common import port_backend, ssh_target
from config.types import (PROFILE_CMAKE_FLAGS, ArchiveSource, Backend, GitSource,
                          InferenceHost, LlamaCpp, Model, Server, Shard)
from spear.rules import (COMMIT_TEXT, SHA256_TEXT, THIS_MACHINE, is_commit, is_sha256,
                         port_clashes)

KEYS = ("inferenceHosts", "sshPrivateKeys")

_HOST_KEYS = ("ssh", "runtimeDir", "backend", "llamaCpp", "model", "server")
_ARCH = re.compile(r"[a-z0-9_]+")
_CMAKE_FLAG = re.compile(r"-D[A-Za-z_][A-Za-z0-9_]*(:[A-Z]+)?=\S*")
_GIT_URL = re.compile(r"[^\s-]\S*")  # no whitespace, and not an option to git


def parse(check: Checker, value: Any, keys_value: Any,
          backends: Mapping[str, Backend] | None,
          other_key_owners: Mapping[str, Collection[str]] | None = None) -> dict[str, InferenceHost]:
    """other_key_owners: besides the inference hosts, what else may have a key in
    sshPrivateKeys, by kind (e.g. {"pods": [...], "REDS endpoints": [...]})."""
    hosts = check.named_map("inferenceHosts", value, "an inference host")
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
    host = check.obj(prefix, value, _HOST_KEYS)
    if host is None:
        return None
    ssh = ssh_target(check, prefix, name, get(host, "ssh"), secret_key,
                     "a host name, ~/.ssh/config alias or IP address")
    runtime_dir = check.text(f"{prefix}.runtimeDir", get(host, "runtimeDir"), absolute_dir,
                             "an absolute path other than / (letters, digits, '._+-/')",
                             default="/opt/spear")
    backend = port_backend(check, f"{prefix}.backend", get(host, "backend"), backends)
    llama_cpp = _llama_cpp(check, f"{prefix}.llamaCpp", get(host, "llamaCpp"))
    model = _model(check, f"{prefix}.model", get(host, "model"))
    server = _server(check, f"{prefix}.server", get(host, "server"),
                     moe=model.moe if model else None)
    if not check.clean_since(start):
        return None
    return InferenceHost(name=name, ssh=ssh, runtime_dir=runtime_dir, backend=backend,
                         llama_cpp=llama_cpp, model=model, server=server)


def _llama_cpp(check: Checker, key: str, value: Any) -> LlamaCpp | None:
    start = check.mark()
    llama = check.obj(key, value, ("source", "profile", "extraCmakeFlags"))
    if llama is None:
        return None
    source = _source(check, f"{key}.source", get(llama, "source"))
    profile = check.choice(f"{key}.profile", get(llama, "profile"), tuple(PROFILE_CMAKE_FLAGS))
    flags_value = get(llama, "extraCmakeFlags")
    flags: list[str | None] = []
    if flags_value is not MISSING and not isinstance(flags_value, list):
        check.fail(f"{key}.extraCmakeFlags", flags_value, "a list of -DNAME=value strings")
    elif flags_value is not MISSING:
        flags = [check.pattern(f"{key}.extraCmakeFlags[{i}]", flag, _CMAKE_FLAG,
                               "a -DNAME=value (or -DNAME:TYPE=value) string")
                 for i, flag in enumerate(flags_value)]
    return LlamaCpp(source, profile, tuple(flags)) if check.clean_since(start) else None


def _source(check: Checker, key: str, value: Any) -> GitSource | ArchiveSource | None:
    if not isinstance(value, Mapping) or ("git" in value) == ("archive" in value):
        check.fail(key, value, "either {git, commit} or {archive, sha256, subdir}"
                   + (" (required)" if value is MISSING else ""))
        return None
    if "git" in value:
        source = check.obj(key, value, ("git", "commit"))
        return GitSource(
            url=check.pattern(f"{key}.git", source["git"], _GIT_URL, "a git URL or path"),
            commit=check.text(f"{key}.commit", get(source, "commit"),
                              lambda v: v if is_commit(v) else None, COMMIT_TEXT),
        )
    source = check.obj(key, value, ("archive", "sha256", "subdir"))
    return ArchiveSource(
        archive=check.text(f"{key}.archive", source["archive"], expand_location, LOCATION_TEXT),
        sha256=_sha256(check, f"{key}.sha256", get(source, "sha256")),
        subdir=check.text(f"{key}.subdir", get(source, "subdir"), relative_subdir,
                          "a relative path inside the archive, without '..'", default="."),
    )


def _sha256(check: Checker, key: str, value: Any) -> str | None:
    """A digest, in the lowercase sha256sum prints."""
    return check.text(key, value, lambda v: v.lower() if is_sha256(v) else None, SHA256_TEXT)


def _model(check: Checker, key: str, value: Any) -> Model | None:
    start = check.mark()
    model = check.obj(key, value, ("arch", "nativeCtx", "moe", "shards", "adapter"))
    if model is None:
        return None
    adapter = get(model, "adapter")
    result = Model(
        arch=check.pattern(f"{key}.arch", get(model, "arch"), _ARCH,
                           "a llama.cpp architecture name ([a-z0-9_]+, e.g. qwen3next, llama)"),
        native_ctx=check.integer(f"{key}.nativeCtx", get(model, "nativeCtx"), 1,
                                 note="required: the context length it was trained at"),
        moe=check.boolean(f"{key}.moe", get(model, "moe"), default=False),
        shards=_shards(check, f"{key}.shards", get(model, "shards")),
        adapter=None if adapter in (MISSING, None, "none") else check.pattern(
            f"{key}.adapter", adapter, FILE_NAME,
            FILE_NAME_TEXT + " under <runtime>/models/lora/, or none for the base model"),
    )
    return result if check.clean_since(start) else None


def _shards(check: Checker, key: str, value: Any) -> tuple[Shard, ...]:
    what = "a non-empty list of {name, size, sha256, source?}"
    if value is MISSING or not isinstance(value, list) or not value:
        check.fail(key, value, what + (" (required)" if value is MISSING else ""))
        return ()
    shards: list[Shard] = []
    for i, item in enumerate(value):
        item_key = f"{key}[{i}]"
        shard = check.obj(item_key, item, ("name", "size", "sha256", "source"))
        if shard is None:
            continue
        name = check.pattern(f"{item_key}.name", get(shard, "name"), FILE_NAME, FILE_NAME_TEXT)
        if name is not None and name in (s.name for s in shards):
            check.fail(f"{item_key}.name", name, "a name no other shard has")
        source = get(shard, "source")
        shards.append(Shard(
            name=name,
            size=check.integer(f"{item_key}.size", get(shard, "size"), 1,
                               note="required: the file size in bytes"),
            sha256=_sha256(check, f"{item_key}.sha256", get(shard, "sha256")),
            source=None if source is MISSING else check.text(
                f"{item_key}.source", source, expand_location, LOCATION_TEXT),
        ))
    return tuple(shards)


def _server(check: Checker, key: str, value: Any, moe: bool | None) -> Server | None:
    start = check.mark()
    server = check.obj(key, value,
                       ("ctxSize", "host", "port", "threads", "gpuLayers", "cpuMoe", "parallel"))
    if server is None:
        return None
    result = Server(
        ctx_size=check.integer(f"{key}.ctxSize", get(server, "ctxSize"), 1,
                               note="no default: state it in the stack"),
        host=check.text(f"{key}.host", get(server, "host"), ip_address, "an IP address",
                        default="127.0.0.1"),
        port=check.port(f"{key}.port", get(server, "port"), 8080),
        threads=check.optional_integer(f"{key}.threads", get(server, "threads"), 1),
        gpu_layers=check.optional_integer(f"{key}.gpuLayers", get(server, "gpuLayers"), 0),
        cpu_moe=check.optional_integer(f"{key}.cpuMoe", get(server, "cpuMoe"), 0),
        parallel=check.integer(f"{key}.parallel", get(server, "parallel"), 1, default=1),
    )
    if result.cpu_moe is not None and moe is False:
        check.fail(f"{key}.cpuMoe", result.cpu_moe,
                   "only with model.moe: true (it keeps mixture-of-experts layers on the CPU)")
    return result if check.clean_since(start) else None


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
