"""What more than one section of the stack reads: an SSH login and its key (a file or a secret),
a port backend by name, an API key secret. (The kinds of value they share are
config/options.py's.)

The section modules import from here, never from each other (tests/unit/test_schema_imports.py).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from config.checker import MISSING, Checker, get
from config.options import KEY_PATH, Choice, Obj, Opt, Text, build, declared
from config.types import PORT as PORT_BACKEND, ApiKey, Backend, InlineKey, KeyFile, SshTarget

_KEY_FILE = Text(lambda v: os.path.expanduser(v) if v.strip() else None,
                 "a path to a private key file")
# Ends up in an environment file and an HTTP header: one line of printable characters.
_API_KEY = re.compile(r"[!-~]+")
_KEY_CHOICE = ("exactly one of {owner}.ssh.privateKeyPath (a key file) or"
               " sshPrivateKeys.{name} (a secret: pulumi config set --secret --path"
               " 'sshPrivateKeys.{name}' < key)")


def ssh_key_entry(keys_value: Any, name: str) -> Any:
    """`name`'s entry in sshPrivateKeys; None when the map itself is bad (parse reports it)."""
    if keys_value is MISSING:
        return MISSING
    return get(keys_value, name) if isinstance(keys_value, Mapping) else None


def private_key(check: Checker, name: str, path: Any, secret: Any,
                owner: str) -> InlineKey | KeyFile | None:
    """`name`'s key: the file at `path` or the secret sshPrivateKeys.<name>; owner: the key of
    what logs in with it (e.g. inferenceHosts.<name>)."""
    one_of = _KEY_CHOICE.format(name=name, owner=owner)
    path = MISSING if path is None else path  # KEY_PATH left out
    if path is MISSING and secret is MISSING:
        check.report(f"sshPrivateKeys.{name}", "nothing", one_of)
        return None
    if path is not MISSING and secret is not MISSING:
        check.report(f"{owner}.ssh.privateKeyPath",
                     f"a key file as well as sshPrivateKeys.{name}", one_of)
        return None
    if path is not MISSING:
        expanded = _KEY_FILE.read(check, f"{owner}.ssh.privateKeyPath", path)
        return KeyFile(expanded) if expanded else None
    if not isinstance(secret, str) or "PRIVATE KEY-----" not in secret:
        described = (f"a secret of {len(secret)} characters without a PEM/OpenSSH header"
                     if isinstance(secret, str) else f"a secret of type {type(secret).__name__}")
        check.report(f"sshPrivateKeys.{name}", described,
                     "a private key (-----BEGIN ... PRIVATE KEY-----)")
        return None
    return InlineKey(secret)


def ssh_obj(**also: Opt) -> Obj:
    """An ssh object: a host spear-fleet logs in to, with its key (a file or a secret)."""
    return declared(SshTarget, privateKeyPath=Opt(KEY_PATH, "a private key file on this machine"
                                                  " (or sshPrivateKeys.<name>)", default=None),
                    **also)


def ssh_target(check: Checker, owner: str, name: str, ssh: dict | None,
               secret_key: Any) -> SshTarget | None:
    """`owner`.ssh as ssh_obj read it, with `name`'s key (a file or a secret)."""
    if ssh is None:
        return None
    start = check.mark()
    login_key = private_key(check, name, ssh["privateKeyPath"], secret_key, owner=owner)
    if not check.clean_since(start):
        return None
    return build(SshTarget, ssh, key=login_key)


def port_backend(check: Checker, key: str, value: Any,
                 backends: Mapping[str, Backend] | None) -> Backend | None:
    """A backend reached on a client port, by name (BACKEND's value)."""
    if backends is None:  # the table itself has a problem, already reported
        return None
    port_backends = [name for name, backend in backends.items() if backend.kind == PORT_BACKEND]
    name = Choice(tuple(port_backends)).read(check, key, value)
    return backends[name] if name else None


def api_key(check: Checker, name: str, value: Any, required_by: list[str]) -> ApiKey | None:
    """The secret `name`; required_by: what needs it, when the stack declares any of them."""
    if value is MISSING:
        if required_by:
            check.report(name, "nothing", f"a secret (required with {' and '.join(required_by)}):"
                         f" pulumi config set --secret {name} < file")
        return None
    if not isinstance(value, str) or not _API_KEY.fullmatch(value):
        # Describe the secret, never echo it.
        described = (f"a secret of {len(value)} characters with whitespace or control characters"
                     if isinstance(value, str) else f"a secret of type {type(value).__name__}")
        check.report(name, described, "one line of printable characters without spaces")
        return None
    return ApiKey(value)


