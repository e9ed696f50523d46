"""`inferenceHosts` and `sshPrivateKeys`: the fleet's inference hosts, by name.

Each host has its own SSH target, runtime folder, llama.cpp source, model and server settings,
and its own SSH key: a key file (`ssh.privateKeyPath`) or a secret in `sshPrivateKeys.<name>`.
Ports and SSH targets are then checked across the whole fleet: every host on a loopback
address is this machine, and shares its ports with the others and with the client's tunnels.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Collection, Mapping
from typing import Any

from config.checker import (FILE_NAME, FILE_NAME_TEXT, HOSTNAME, LOCATION_TEXT, MISSING, USER,
                            Checker, absolute_dir, expand_location, get, ip_address,
                            relative_subdir)
from config.types import (PORT, PROFILE_CMAKE_FLAGS, ArchiveSource, Backend, GitSource,
                          InferenceHost, InlineKey, KeyFile, LlamaCpp, Model, Server, Shard,
                          SshTarget)
from spear.rules import COMMIT, COMMIT_TEXT, HOST_KEY_TEXT, host_key_normal

KEYS = ("inferenceHosts", "sshPrivateKeys")

_HOST_KEYS = ("ssh", "runtimeDir", "backend", "llamaCpp", "model", "server")
_ARCH = re.compile(r"[a-z0-9_]+")
_CMAKE_FLAG = re.compile(r"-D[A-Za-z_][A-Za-z0-9_]*(:[A-Z]+)?=\S*")
_GIT_URL = re.compile(r"[^\s-]\S*")  # no whitespace, and not an option to git
_KEY_CHOICE = ("exactly one of {owner}.ssh.privateKeyPath (a key file) or"
               " sshPrivateKeys.{name} (a secret: pulumi config set --secret --path"
               " 'sshPrivateKeys.{name}' < key)")


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


def ssh_key_entry(keys_value: Any, name: str) -> Any:
    """`name`'s entry in sshPrivateKeys; None when the map itself is bad (parse reports it)."""
    if keys_value is MISSING:
        return MISSING
    return get(keys_value, name) if isinstance(keys_value, Mapping) else None


def _host(check: Checker, name: str, value: Any, secret_key: Any,
          backends: Mapping[str, Backend] | None) -> InferenceHost | None:
    start = check.mark()
    prefix = f"inferenceHosts.{name}"
    host = check.obj(prefix, value, _HOST_KEYS)
    if host is None:
        return None
    ssh = _ssh(check, name, get(host, "ssh"), secret_key)
    runtime_dir = check.text(f"{prefix}.runtimeDir", get(host, "runtimeDir"), absolute_dir,
                             "an absolute path other than / (letters, digits, '._+-/')",
                             default="/opt/spear")
    backend = _backend(check, f"{prefix}.backend", get(host, "backend"), backends)
    llama_cpp = _llama_cpp(check, f"{prefix}.llamaCpp", get(host, "llamaCpp"))
    model = _model(check, f"{prefix}.model", get(host, "model"))
    server = _server(check, f"{prefix}.server", get(host, "server"),
                     moe=model.moe if model else None)
    if not check.clean_since(start):
        return None
    return InferenceHost(name, ssh, runtime_dir, backend, llama_cpp, model, server)


def _backend(check: Checker, key: str, value: Any,
             backends: Mapping[str, Backend] | None) -> Backend | None:
    if backends is None:  # the table itself has a problem, already reported
        return None
    port_backends = [name for name, backend in backends.items() if backend.kind == PORT]
    name = check.choice(key, value, port_backends, default="reds")
    return backends[name] if name else None


def _ssh(check: Checker, name: str, value: Any, secret_key: Any) -> SshTarget | None:
    start = check.mark()
    key = f"inferenceHosts.{name}.ssh"
    ssh = check.obj(key, value, ("host", "port", "user", "privateKeyPath", "hostKey"))
    if ssh is None:
        return None
    host = check.pattern(f"{key}.host", get(ssh, "host"), HOSTNAME,
                         "a host name, ~/.ssh/config alias or IP address")
    port = check.port(f"{key}.port", get(ssh, "port"), 22)
    user = check.pattern(f"{key}.user", get(ssh, "user"), USER, "a user name", default="root")
    private_key = _private_key(check, name, get(ssh, "privateKeyPath"), secret_key)
    pinned = host_key(check, f"{key}.hostKey", get(ssh, "hostKey"))
    if not check.clean_since(start):
        return None
    return SshTarget(host, port, user, private_key, host_key=pinned)


def host_key(check: Checker, key: str, value: Any) -> str | None:
    """ssh.hostKey: the key the host must present, normalised; None when left out."""
    if value is MISSING:
        return None
    return check.text(key, value, host_key_normal, HOST_KEY_TEXT)


def _private_key(check: Checker, name: str, path: Any, secret: Any,
                 owner: str | None = None) -> InlineKey | KeyFile | None:
    """owner: the key of what logs in with it (default inferenceHosts.<name>)."""
    owner = owner or f"inferenceHosts.{name}"
    one_of = _KEY_CHOICE.format(name=name, owner=owner)
    if path is MISSING and secret is MISSING:
        check.report(f"sshPrivateKeys.{name}", "nothing", one_of)
        return None
    if path is not MISSING and secret is not MISSING:
        check.report(f"{owner}.ssh.privateKeyPath",
                     f"a key file as well as sshPrivateKeys.{name}", one_of)
        return None
    if path is not MISSING:
        expanded = check.text(f"{owner}.ssh.privateKeyPath", path,
                              lambda v: os.path.expanduser(v) if v.strip() else None,
                              "a path to a private key file")
        return KeyFile(expanded) if expanded else None
    if not isinstance(secret, str) or "PRIVATE KEY-----" not in secret:
        described = (f"a secret of {len(secret)} characters without a PEM/OpenSSH header"
                     if isinstance(secret, str) else f"a secret of type {type(secret).__name__}")
        check.report(f"sshPrivateKeys.{name}", described,
                     "a private key (-----BEGIN ... PRIVATE KEY-----)")
        return None
    return InlineKey(secret)


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
            commit=check.pattern(f"{key}.commit", get(source, "commit"), COMMIT, COMMIT_TEXT),
        )
    source = check.obj(key, value, ("archive", "sha256", "subdir"))
    return ArchiveSource(
        archive=check.text(f"{key}.archive", source["archive"], expand_location, LOCATION_TEXT),
        sha256=check.sha256(f"{key}.sha256", get(source, "sha256")),
        subdir=check.text(f"{key}.subdir", get(source, "subdir"), relative_subdir,
                          "a relative path inside the archive, without '..'", default="."),
    )


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
            sha256=check.sha256(f"{item_key}.sha256", get(shard, "sha256")),
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


THIS_MACHINE = "this machine"


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

    taken: dict[tuple[str, int], list[str]] = defaultdict(list)
    for backend in backends.values():
        if backend.port is not None:
            taken[(THIS_MACHINE, backend.port)].append(
                f"backends.{backend.name} (the client port of backend {backend.name})")
    for name, host in hosts.items():
        machine = THIS_MACHINE if host.ssh.is_loopback else host.ssh.host
        prefix = f"inferenceHosts.{name}"
        taken[(machine, host.ssh.port)].append(f"{prefix}.ssh.port (the SSH port)")
        taken[(machine, host.server.port)].append(f"{prefix}.server.port")
    for (machine, port), users in taken.items():
        servers = [user for user in users if user.endswith(".server.port")]
        for server_key in servers:
            others = list(dict.fromkeys(user for user in users if user != server_key))
            if others:
                check.fail(server_key.split(" ")[0], port,
                           f"a port other than {', '.join(others)}, since they share {machine}"
                           + (" (the host is reached on a loopback address)"
                              if machine == THIS_MACHINE else ""))
