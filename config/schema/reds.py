"""`redsEndpoints`: the REDS endpoints of seed 000 §6.2.7 (the `reds` backend), by name.

The REDS host is a stable host: spear-fleet installs nothing there, it opens the tunnel and checks
that something answers. An endpoint is either a server someone runs by hand on a host that
spear-fleet only logs in to (`ssh`, preferably an `~/.ssh/config` alias, and the server's `port`),
or the server of an inference host this stack manages (`inferenceHost`: the host's SSH login and
server port). With `ssh`, the key is a key file (`ssh.privateKeyPath`), a secret in the fleet's
`sshPrivateKeys.<name>`, or else the alias's IdentityFile, read when the connection is made.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from config.checker import MISSING, Checker
from config.options import BACKEND, KEY_PATH, PORT, Later, Named, Opt, Raw, build, declared
from config.schema.common import port_backend, private_key, ssh_key_entry
from config.types import Backend, InferenceHost, RedsEndpoint, RedsSsh

DEFAULT_PORT = 8010  # SPEAR_SERVER_PORT on the REDS host in the seed's profile
LOOPBACK = "127.0.0.1"  # where a hand-run server listens: clients reach it through the tunnel

_ONE_OF = ("exactly one of inferenceHost (a name in inferenceHosts: the server this stack"
           " manages there) or ssh {host, port?, user?, privateKeyPath?} (a host whose server"
           " someone else runs, on `port`)")
# Left out: ~/.ssh/config's entry for the host says, when the connection is made.
_SSH = declared(RedsSsh, privateKeyPath=Opt(KEY_PATH, "a private key file (left out:"
                                            " sshPrivateKeys.<name>, else the alias's"
                                            " IdentityFile)", default=None))
# One of inferenceHost and ssh (_ONE_OF): checked by the section, which says which is missing.
ENDPOINT = declared(
    RedsEndpoint,
    inferenceHost=Opt(Raw({"type": "string"}), "the inference host whose server this is",
                      default=None),
    ssh=Opt(Later(_SSH), "the host whose server someone else runs", default=None),
    port=Opt(Raw(PORT.schema()), f"the server's port there (with ssh; default {DEFAULT_PORT})",
             default=None),
    backend=Opt(BACKEND, "the client backend whose tunnel reaches it", default="reds"))
_ENDPOINTS = Named(ENDPOINT, "a REDS endpoint", non_empty=False)
OPTIONS = {"redsEndpoints": Opt(_ENDPOINTS, "REDS endpoints, by name", default={})}


def parse(check: Checker, value: Any, ssh_keys_value: Any,
          backends: Mapping[str, Backend] | None, inference_hosts: Mapping[str, InferenceHost],
          declared_hosts: Collection[str], other_names: Collection[str]) -> dict[str, RedsEndpoint]:
    """declared_hosts: every name under inferenceHosts, parsed or not (a host with a problem of
    its own is not also unknown); other_names: the names the hosts and pods already take."""
    endpoints = {} if value is MISSING else _ENDPOINTS.entries(check, "redsEndpoints", value)
    if endpoints is None:
        return {}
    parsed = {}
    for name, item in endpoints.items():
        if name in other_names:
            check.fail(f"redsEndpoints.{name}", name, "a name no inference host or pod has:"
                       " sshPrivateKeys.<name> holds one key, and resources are named after it")
            continue  # its key in sshPrivateKeys, say, is the other's
        endpoint = _endpoint(check, name, item, ssh_key_entry(ssh_keys_value, name), backends,
                             inference_hosts, declared_hosts)
        if endpoint is not None:
            parsed[name] = endpoint
    return parsed


def _endpoint(check: Checker, name: str, value: Any, secret_key: Any,
              backends: Mapping[str, Backend] | None, inference_hosts: Mapping[str, InferenceHost],
              declared_hosts: Collection[str]) -> RedsEndpoint | None:
    start = check.mark()
    prefix = f"redsEndpoints.{name}"
    endpoint = ENDPOINT.read(check, prefix, value)
    if endpoint is None:
        return None
    backend = port_backend(check, f"{prefix}.backend", endpoint["backend"], backends)
    host_name, ssh = endpoint["inferenceHost"], endpoint["ssh"]
    if (host_name is None) == (ssh is None):
        check.report(prefix, "neither inferenceHost nor ssh" if host_name is None
                     else "both inferenceHost and ssh", _ONE_OF)
        return None
    if host_name is not None:
        served = _managed(check, name, endpoint, host_name, secret_key, inference_hosts,
                          declared_hosts)
    else:
        served = _by_hand(check, name, endpoint, ssh, secret_key)
    if served is None or not check.clean_since(start):
        return None
    login, address, port = served
    return build(RedsEndpoint, endpoint, name=name, ssh=login, address=address, port=port,
                 backend=backend, inference_host=host_name)


def _managed(check: Checker, name: str, endpoint: dict, host_name: Any, secret_key: Any,
             inference_hosts: Mapping[str, InferenceHost], declared_hosts: Collection[str]
             ) -> tuple[RedsSsh, str, int] | None:
    """The managed host's login, server address and port."""
    prefix = f"redsEndpoints.{name}"
    if host_name not in declared_hosts:
        check.fail(f"{prefix}.inferenceHost", host_name,
                   "one of the inferenceHosts: " + ", ".join(declared_hosts))
        return None
    if endpoint["port"] is not None:
        check.fail(f"{prefix}.port", endpoint["port"], f"no port with inferenceHost: the server's"
                   f" port is inferenceHosts.{host_name}.server.port")
    if secret_key not in (MISSING, None):
        check.report(f"sshPrivateKeys.{name}", f"a key for an endpoint on inferenceHosts.{host_name}",
                     f"no key: it logs in as inferenceHosts.{host_name} does")
    host = inference_hosts.get(host_name)
    if host is None:  # the host has problems of its own, reported already
        return None
    login = RedsSsh(host=host.ssh.host, port=host.ssh.port, user=host.ssh.user, key=host.ssh.key,
                    host_key=host.ssh.host_key)
    return login, host.server.host, host.server.port


def _by_hand(check: Checker, name: str, endpoint: dict, value: Any, secret_key: Any
             ) -> tuple[RedsSsh, str, int] | None:
    """The stack's login to a host whose server someone runs by hand, on loopback at `port`."""
    if secret_key is None:  # sshPrivateKeys is not a map: reported already
        secret_key = MISSING
    port = PORT.read(check, f"redsEndpoints.{name}.port", DEFAULT_PORT if endpoint["port"] is None
                     else endpoint["port"])
    ssh = _SSH.read(check, f"redsEndpoints.{name}.ssh", value)
    if ssh is None:
        return None
    path = ssh["privateKeyPath"]
    login = build(RedsSsh, ssh, key=None if path is None and secret_key is MISSING else
                  private_key(check, name, path, secret_key, owner=f"redsEndpoints.{name}"))
    return login, LOOPBACK, port
