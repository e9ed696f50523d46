"""Which SSH host key a host must present before anything is sent to it (Session asks here;
components/hostops/host_key.py records a key on first contact).

A connection's `host_key` ("<type> <base64>", as in known_hosts) is the key its host must
present: the stack's `ssh.hostKey`, or the key that host's `HostKey` resource recorded on first
contact (trust on first use, which the preview says). Without one, known_hosts decides as `ssh`
does (~/.ssh/known_hosts, or $SPEAR_KNOWN_HOSTS; an ssh_config alias by the HostName it resolves
to). A host that no source knows is refused. A key other than the expected one stops the
connection at the handshake, before the login, naming the host and both fingerprints.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Callable

import paramiko

from spear.rules import HOST_KEY_TEXT, host_key_normal

KNOWN_HOSTS_ENV = "SPEAR_KNOWN_HOSTS"
_KEY_CLASSES = {"ssh-ed25519": paramiko.Ed25519Key, "ssh-rsa": paramiko.RSAKey,
                "ecdsa-sha2-nistp256": paramiko.ECDSAKey, "ecdsa-sha2-nistp384": paramiko.ECDSAKey,
                "ecdsa-sha2-nistp521": paramiko.ECDSAKey}  # by spear.rules.HOST_KEY_TYPES


def parse(text: str) -> paramiko.PKey | None:
    """The key of a known_hosts line or of its key part (spear.rules.host_key_normal); None when
    it is neither."""
    normal = host_key_normal(text)
    if normal is None:
        return None
    kind, data = normal.split()
    try:
        return _KEY_CLASSES[kind](data=base64.b64decode(data))
    except paramiko.SSHException:
        return None


def fingerprint(key: paramiko.PKey) -> str:
    """As `ssh-keygen -l` prints it: the type and SHA256:<base64 of the key's digest>."""
    digest = base64.b64encode(hashlib.sha256(key.asbytes()).digest()).decode().rstrip("=")
    return f"{key.get_name()} SHA256:{digest}"


def known_hosts_line(host: str, port: int, host_key: str) -> str:
    """The known_hosts line `ssh` checks `host`:`port` against."""
    return f"{host if port == 22 else f'[{host}]:{port}'} {host_key}\n"


def known_hosts_path() -> str:
    return os.environ.get(KNOWN_HOSTS_ENV) or os.path.expanduser("~/.ssh/known_hosts")


class HostKeyError(Exception):
    """The host presented no key, or another key, than the one it must (Session raises it as a
    RemoteError)."""


class _Record(paramiko.MissingHostKeyPolicy):
    """First contact: accept the key the host presents (HostKey records it)."""

    def __init__(self) -> None:
        self.used = False

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        self.used = True


class _Refuse(paramiko.MissingHostKeyPolicy):
    def __init__(self, where: str) -> None:
        self.where = where

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        raise HostKeyError(
            f"no SSH host key is known for {self.where}, which presents {fingerprint(key)}:"
            f" nothing was sent. Pin it (ssh.hostKey), add it to {known_hosts_path()}, or let the"
            " stack record it at first contact (its <name>-host-key resource)")


def expect(client: paramiko.SSHClient, host_key: str | None, host: str, port: int,
           where: str, first_contact: bool) -> Callable[[], str]:
    """Sets what `client` accepts from `host`:`port` (Session calls it before connecting);
    returns what says, once connected, why the key presented was trusted."""
    if host_key:
        key = parse(host_key)
        if key is None:
            raise HostKeyError(f"the host key for {where} is not {HOST_KEY_TEXT}")
        client.get_host_keys().add(host if port == 22 else f"[{host}]:{port}", key.get_name(), key)
        source = "the key the stack holds"
    elif os.path.isfile(known_hosts_path()):
        client.load_host_keys(known_hosts_path())
        source = known_hosts_path()
    else:
        source = ""
    policy = _Record() if first_contact else _Refuse(where)
    client.set_missing_host_key_policy(policy)
    return lambda: "first use" if getattr(policy, "used", False) else source


def mismatch(where: str, err: paramiko.BadHostKeyException) -> HostKeyError:
    return HostKeyError(
        f"the SSH host key of {where} is not the expected one: expected"
        f" {fingerprint(err.expected_key)}, presented {fingerprint(err.key)}; nothing was sent."
        " If the host was re-created on purpose, pin its new key (ssh.hostKey) or make the"
        " stack record it again: pulumi up --replace <the urn of its <name>-host-key resource>")
