"""`inferenceHosts` and `sshPrivateKeys`: the fleet's inference hosts, by name.

Each host has its own SSH target, runtime folder, llama.cpp source, model and server settings,
and its own SSH key: a key file (`ssh.privateKeyPath`) or a secret in `sshPrivateKeys.<name>`.
Ports and SSH targets are then checked across the whole fleet: every host on a loopback
address is this machine, and shares its ports with the others and with the client's tunnels.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from config.checker import MISSING, Checker
from config.options import BACKEND, SECRET, Named, Opt, Raw, build, declared
from config.schema.common import port_backend, ssh_obj, ssh_target
from config.types import Backend, InferenceHost
from spear.rules import THIS_MACHINE, port_clashes

HOST = declared(InferenceHost, ssh=Opt(ssh_obj(), "how spear-fleet logs in"),
                backend=Opt(BACKEND, "the client backend whose port reaches this server",
                            default="reds"))
_HOSTS = Named(HOST, "an inference host")
OPTIONS = {
    "inferenceHosts": Opt(_HOSTS, "the inference hosts, by name"),
    "sshPrivateKeys": Opt(Raw({"type": "object", "additionalProperties": SECRET.schema()}),
                          "a secret private key per host, pod or endpoint name", default=None),
}


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
    model, server = host["model"], host["server"]
    if server and model and server.cpu_moe is not None and not model.moe:
        check.fail(f"{prefix}.server.cpuMoe", server.cpu_moe,
                   "only with model.moe: true (it keeps mixture-of-experts layers on the CPU)")
    names = [shard.name for shard in model.shards] if model else []
    for i, shard_name in enumerate(names):
        if shard_name in names[:i]:
            check.fail(f"{prefix}.model.shards[{i}].name", shard_name, "a name no other shard has")
    if not check.clean_since(start):
        return None
    return build(InferenceHost, host, name=name, ssh=ssh, backend=backend)


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
