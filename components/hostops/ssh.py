"""SSH to a host, for the dynamic resources that change something on it.

Runs inside Pulumi's dynamic-provider process, where resource inputs arrive as plain values:
the connection is a dict `{host, port, user, private_key, host_key}` (a Pulumi secret in state).
The host may be an `~/.ssh/config` alias: its entry is applied where the connection is made, as
`ssh` would apply it (`resolve_connection`). The host must present `host_key`, or the key
known_hosts has for it (components/hostops/known_hosts.py).
"""

from __future__ import annotations

import contextlib
import http.client
import io
import logging
import os
import shlex
import socket
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import paramiko

from components.hostops import known_hosts

_KEY_TYPES = (paramiko.Ed25519Key, paramiko.ECDSAKey, paramiko.RSAKey)
# paramiko logs every refused channel as an error ("Secsh channel 4 open FAILED"), once a second
# while a health check waits for a server to start: `http` turns a refusal into NoAnswer, which
# says it once, where it matters.
logging.getLogger("paramiko.transport").setLevel(logging.CRITICAL)
# Another ssh_config file than ~/.ssh/config (the provider process inherits it from `pulumi`).
SSH_CONFIG_ENV = "SPEAR_SSH_CONFIG"
DEFAULT_PORT = 22
DEFAULT_USER = "root"  # the fleet's default login, as the config's for inference hosts
# RFC 4254 §5.1: why the host's sshd would not open a channel to a port. It says "connect
# failed" for every failed connect; to a port on the host's own loopback that is a refusal.
_OPEN_FAILURES = {1: "port forwarding is not allowed by the host's sshd",
                  2: "connection refused", 4: "the host's sshd is short of resources"}


class RemoteError(Exception):
    """A command on the host failed; the message says which and shows its output."""


class HostKeyRefused(RemoteError):
    """The host presented another key than the one it must, or none is known for it: nothing
    was sent, and trying again cannot help."""


class ConnectionLost(RemoteError):
    """The SSH connection dropped while something ran on the host: whether it finished there is
    not known, so the message says how to find out and finish."""

    def __init__(self, where: str, doing: str, err: object) -> None:
        super().__init__(
            f"the SSH connection to {where} was lost while {doing} ({err or type(err).__name__}):"
            " it may or may not have finished on the host. `pulumi up --refresh` reads what is"
            " there and finishes the change")


class NoAnswer(ConnectionError):
    """Nothing accepted a connection to the port on the host; `reason` says why in a few words."""

    def __init__(self, where: str, address: str, port: int, reason: str) -> None:
        super().__init__(f"nothing answers on {address}:{port} on {where} ({reason})")
        self.reason = reason


@dataclass(frozen=True)
class Result:
    code: int
    stdout: str
    stderr: str


def connection_input(host: str, port: int | None, user: str | None,
                     private_key: Any, host_key: Any = None) -> dict[str, Any]:
    """The `connection` input every host resource takes (secret because of the key); a port,
    user or key left None comes from the host's ssh_config entry (resolve_connection); the host
    key is the one the host must present (components/hostops/known_hosts.py)."""
    return {"host": host, "port": port, "user": user, "private_key": private_key,
            "host_key": host_key}


def resolve_connection(connection: Mapping[str, Any],
                       config_path: str | None = None) -> dict[str, Any]:
    """The connection as `ssh <host>` would make it: the HostName the host's ssh_config entry
    names, and its Port, User and IdentityFile (read here) where the connection leaves them out
    (None); otherwise port 22 and user root. The file: config_path, $SPEAR_SSH_CONFIG, or
    ~/.ssh/config; none is no entry."""
    path = config_path or os.environ.get(SSH_CONFIG_ENV) or os.path.expanduser("~/.ssh/config")
    alias = connection["host"]
    try:
        entry = paramiko.SSHConfig.from_path(path).lookup(alias) if os.path.isfile(path) else {}
    except paramiko.ssh_exception.ConfigParseError as err:
        raise RemoteError(f"cannot read {path}: {err}") from err
    return {
        "host": entry.get("hostname", alias),
        "port": int(connection.get("port") or entry.get("port", DEFAULT_PORT)),
        "user": connection.get("user") or entry.get("user", DEFAULT_USER),
        "private_key": connection.get("private_key") or _identity(alias, entry, path),
    }


def _identity(alias: str, entry: Mapping[str, Any], path: str) -> str:
    """The text of the first IdentityFile of the entry that exists."""
    for file in entry.get("identityfile", []):
        if os.path.isfile(file):
            with open(file, encoding="utf-8") as key_file:
                return key_file.read()
    raise RemoteError(f"no SSH key for {alias}: the stack gives none (ssh.privateKeyPath or"
                      f" sshPrivateKeys.<name>), and {path} names no IdentityFile for it that exists")


def _load_key(text: str) -> paramiko.PKey:
    for key_type in _KEY_TYPES:
        try:
            return key_type.from_private_key(io.StringIO(text))
        except paramiko.SSHException:
            continue
    raise RemoteError("the SSH private key is not an Ed25519, ECDSA or RSA key in OpenSSH/PEM form")


class Session:
    """One SSH connection: run commands, move files, open a channel to a port on the host."""

    def __init__(self, connection: Mapping[str, Any], connect_timeout: float = 20.0,
                 first_contact: bool = False) -> None:
        """`connection["host_key"]` (or known_hosts) is the key the host must present; with
        first_contact a host nothing knows yet is accepted (HostKey then records its key)."""
        alias = connection["host"]
        host_key = connection.get("host_key")
        connection = resolve_connection(connection)
        self.where = f"{connection['user']}@{connection['host']}:{connection['port']}" + (
            f" ({alias})" if alias != connection["host"] else "")
        self._client = paramiko.SSHClient()
        try:
            trusted = known_hosts.expect(
                self._client, host_key, connection["host"], int(connection["port"]), self.where,
                first_contact)
            self._client.connect(
                connection["host"],
                port=int(connection["port"]),
                username=connection["user"],
                pkey=_load_key(connection["private_key"]),
                timeout=connect_timeout,
                banner_timeout=connect_timeout,
                auth_timeout=connect_timeout,
                allow_agent=False,
                look_for_keys=False,
            )
        except paramiko.BadHostKeyException as err:
            raise HostKeyRefused(str(known_hosts.mismatch(self.where, err))) from None
        except known_hosts.HostKeyError as err:
            raise HostKeyRefused(str(err)) from None
        except (OSError, paramiko.SSHException) as err:
            raise RemoteError(f"cannot reach {self.where} over SSH: {err}") from err
        transport = self._client.get_transport()
        assert transport is not None
        self.host_key: paramiko.PKey = transport.get_remote_server_key()  # as presented
        self.trusted = trusted()  # why: "first use", or the key's source
        self._sftp: paramiko.SFTPClient | None = None

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._sftp is not None:
            self._sftp.close()
        self._client.close()

    @contextlib.contextmanager
    def _lost_as(self, doing: str) -> Iterator[None]:
        """Turns paramiko's errors of a dropped connection into ConnectionLost (raised from
        None: the reason is in the message, paramiko's frames would only bury it)."""
        try:
            yield
        except (paramiko.SSHException, EOFError, OSError) as err:
            if self._alive():
                raise
            raise ConnectionLost(self.where, doing, err) from None

    def _alive(self) -> bool:
        transport = self._client.get_transport()
        return transport is not None and transport.is_active()

    def run(self, command: str, check: bool = True, timeout: float | None = None) -> Result:
        """Runs a shell command; with check, a non-zero exit raises with the output's tail."""
        with self._lost_as(f"`{command}` ran"):
            _, out, err = self._client.exec_command(command, timeout=timeout)
            stdout = out.read().decode(errors="replace")
            stderr = err.read().decode(errors="replace")
            result = Result(out.channel.recv_exit_status(), stdout, stderr)
        if result.code == -1 and not self._alive():  # paramiko's status of a channel cut off
            raise ConnectionLost(self.where, f"`{command}` ran", "no exit status")
        if check and result.code != 0:
            raise RemoteError(
                f"on {self.where}: `{command}` exited {result.code}\n{tail(stdout + stderr)}"
            )
        return result

    @property
    def sftp(self) -> paramiko.SFTPClient:
        if self._sftp is None:
            self._sftp = self._client.open_sftp()
        return self._sftp

    def write(self, path: str, content: str | bytes, mode: int = 0o644) -> None:
        """Writes a file atomically (temp file, then rename), creating its folder; a write cut
        off leaves at most the temp file, with the file's mode, which the next write replaces."""
        data = content.encode() if isinstance(content, str) else content
        folder = path.rsplit("/", 1)[0] or "/"
        self.run(f"mkdir -p {shlex.quote(folder)}")
        temp = f"{path}.spear-tmp"
        with self._lost_as(f"{path} was written"):
            with self.sftp.open(temp, "wb") as handle:
                handle.chmod(mode)  # before the content: a secret is never readable by others
                handle.write(data)
            self.sftp.posix_rename(temp, path)

    def upload(self, local_path: str, remote_path: str) -> None:
        folder = remote_path.rsplit("/", 1)[0] or "/"
        self.run(f"mkdir -p {shlex.quote(folder)}")
        with self._lost_as(f"{remote_path} was uploaded"):
            self.sftp.put(local_path, f"{remote_path}.spear-tmp")
            self.sftp.posix_rename(f"{remote_path}.spear-tmp", remote_path)

    def read(self, path: str) -> str | None:
        """A file's text, or None when it does not exist."""
        try:
            with self._lost_as(f"{path} was read"), self.sftp.open(path, "rb") as handle:
                return handle.read().decode(errors="replace")
        except FileNotFoundError:
            return None

    def http(self, port: int, method: str, path: str, body: bytes = b"",
             address: str = "127.0.0.1", timeout: float = 30.0,
             headers: Mapping[str, str] | None = None) -> tuple[int, bytes]:
        """One HTTP request to a port on the host's loopback (or an address the host reaches),
        through this SSH connection: (status, body).

        The inference server listens on the host's loopback only; clients reach it through an
        SSH channel like this one, so checks never need a port opened on the network.
        """
        status, _, answer = self.http_exchange(port, method, path, body, address, timeout, headers)
        return status, answer

    def http_exchange(self, port: int, method: str, path: str, body: bytes = b"",
                      address: str = "127.0.0.1", timeout: float = 30.0,
                      headers: Mapping[str, str] | None = None
                      ) -> tuple[int, dict[str, str], bytes]:
        """Like `http`, with the answer's headers (lower-case names)."""
        transport = self._client.get_transport()
        assert transport is not None
        asked = f"{method} {path} was asked of port {port}"
        try:
            channel = transport.open_channel(
                "direct-tcpip", (address, port), ("127.0.0.1", 0), timeout=timeout
            )
        except paramiko.ChannelException as err:
            raise NoAnswer(self.where, address, port,
                           _OPEN_FAILURES.get(err.code, err.text)) from err
        # paramiko re-raises what ended its transport: EOFError when the peer went away.
        except (paramiko.SSHException, EOFError, OSError) as err:
            if not self._alive():
                raise ConnectionLost(self.where, asked, err) from None
            raise NoAnswer(self.where, address, port, str(err) or type(err).__name__) from err
        channel.settimeout(timeout)
        conn = _ChannelConnection(channel, f"{address}:{port}", timeout)
        try:
            with self._lost_as(asked):
                conn.request(method, path, body=body, headers={
                    "Content-Type": "application/json", "Connection": "close", **(headers or {})})
                response = conn.getresponse()
                return (response.status, {k.lower(): v for k, v in response.getheaders()},
                        response.read())
        except socket.timeout as err:
            raise ConnectionError(f"{address}:{port} on {self.where} did not answer in {timeout} s") from err
        except http.client.HTTPException as err:
            if not self._alive():  # the answer cut off with the connection
                raise ConnectionLost(self.where, asked, err) from None
            raise ConnectionError(f"not an HTTP answer from {address}:{port} on {self.where}: {err!r}") from err
        finally:
            channel.close()


class _ChannelConnection(http.client.HTTPConnection):
    """The standard library's HTTP client over an open SSH channel (it speaks HTTP/1.1 to
    whatever socket-like object is its `sock`; the channel is one)."""

    def __init__(self, channel: paramiko.Channel, host: str, timeout: float) -> None:
        super().__init__(host, timeout=timeout)
        self.sock = channel

    def connect(self) -> None:  # the channel is the connection
        pass

    def close(self) -> None:
        # http.client lets go of the connection once a `Connection: close` answer's head is read,
        # counting on the response's file to keep a socket open; a channel's file does not, so
        # the channel's owner closes it once the body is read.
        self.sock = None


def bearer_headers(api_key: str | None) -> dict[str, str]:
    """The header an OpenAI-compatible server with an API key wants; none without a key."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])

