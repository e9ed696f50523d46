"""`backends`: the client backends of seed 000 §6.2.7, an open typed map.

The seed's four are the defaults; a stack may move a port, or add a backend with one entry
(`{kind: port, port: 8083}` or `{kind: api}`). The tunnel ports differ so every backend can be
up at once. Components, the ports policy (through the `backends` stack output) and the gateway
read the table from here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from config.checker import MISSING, Checker
from config.options import PORT as PORT_KIND
from config.options import Choice, Named, Obj, Opt
from config.types import API, BACKEND_KINDS, PORT, Backend, InferenceHost
from spear.rules import THIS_MACHINE, port_clashes

# A seed backend's kind and port default to the seed's; a new one's kind to `port`.
BACKEND = Obj({
    "kind": Opt(Choice(BACKEND_KINDS), "port (a client port) or api (a hosted API)", default=None),
    "port": Opt(PORT_KIND, "the client-side port (kind port only)", default=None),
})
OPTIONS = {"backends": Opt(Named(BACKEND, "{kind?, port?}", non_empty=False),
                           "client backends beyond (or moving) the seed's four", default={})}

SEED_BACKENDS = {
    "local": Backend(name="local", kind=PORT, port=8080,
                     what="a llama-server on the client machine"),
    "remote": Backend(name="remote", kind=PORT, port=8081, what="an SSH tunnel to the RunPod pod"),
    "reds": Backend(name="reds", kind=PORT, port=8082, what="an SSH tunnel to the REDS host"),
    "anthropic": Backend(name="anthropic", kind=API, port=None, what="the Anthropic API"),
}


def parse(check: Checker, value: Any) -> dict[str, Backend] | None:
    start = check.mark()
    given = OPTIONS["backends"].read(check, "backends", value)
    if given is None:
        return None
    table = dict(SEED_BACKENDS)
    for name, entry in given.items():
        if entry is None:
            continue
        key, seed = f"backends.{name}", SEED_BACKENDS.get(name)
        kind, port = entry["kind"] or (seed.kind if seed else PORT), entry["port"]
        if kind == API:
            if port is not None:
                check.fail(f"{key}.port", port, f"no port: a backend of kind {API} is a hosted API")
            table[name] = Backend(name=name, kind=API, port=None,
                                  what=seed.what if seed else f"the {name} API")
            continue
        if port is None and seed and seed.kind == PORT:
            port = seed.port
        elif port is None and "port" not in value[name]:  # a bad port is reported already
            check.fail(f"{key}.port", MISSING, f"{PORT_KIND.allowed} (required)")
        table[name] = Backend(name=name, kind=PORT, port=port,
                              what=seed.what if seed else f"127.0.0.1:{port} on the client")
    if not check.clean_since(start):
        return None
    _check_distinct(check, table)
    return table if check.clean_since(start) else None


def _check_distinct(check: Checker, table: dict[str, Backend]) -> None:
    # The client ports are all this machine's.
    clashes = port_clashes((THIS_MACHINE, backend.port, name) for name, backend in table.items()
                           if backend.port is not None)
    first = {port: names[0] for (_, port), names in clashes.items()}
    for name, backend in table.items():
        other = first.get(backend.port)
        if other not in (None, name):
            check.fail(f"backends.{name}.port", backend.port,
                       f"a port other than backends.{other} ({backend.port}): the tunnels of "
                       "different backends must be able to be up at once")


def check_one_server_per_tunnel(check: Checker, hosts: Mapping[str, InferenceHost],
                                users: Iterable[tuple[str, Backend | None, str]]) -> None:
    """A backend's client port tunnels to one server.

    The inference hosts hold their backends first; then each user (its config key, its backend,
    the config key of the server it reaches) must take a backend no other server holds.
    """
    # (A backend is None only when the backend table had a problem, reported already.)
    servers = {host.backend.name: f"inferenceHosts.{name}"
               for name, host in hosts.items() if host.backend}
    for key, backend, server in users:
        if backend is None:
            continue
        other = servers.setdefault(backend.name, server)
        if other != server:
            check.fail(f"{key}.backend", backend.name,
                       f"a backend {other} does not use: the client's port {backend.port}"
                       " tunnels to one server")
