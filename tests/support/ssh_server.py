"""A real SSH server for unit tests of host-key checks and dropped connections: paramiko's
server side on 127.0.0.1, with a host key the test chooses (and may change), accepting one client
key. It records every login attempt, so a test can show that a refused host key stopped the
connection before the login (nothing of the client's was sent). A command it is asked to run
never finishes: `cut()` drops every connection meanwhile, as a network fault would."""

from __future__ import annotations

import io
import socket
import threading

import paramiko
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


def new_key_text() -> str:
    """A fresh Ed25519 private key, OpenSSH text (paramiko reads them but cannot make them)."""
    return Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption()).decode()


def new_key() -> paramiko.Ed25519Key:
    return paramiko.Ed25519Key.from_private_key(io.StringIO(new_key_text()))


class _Server(paramiko.ServerInterface):
    def __init__(self, owner: SshServer) -> None:
        self.owner = owner

    def get_allowed_auths(self, username: str) -> str:
        return "publickey"

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        self.owner.logins.append(username)
        return (paramiko.AUTH_SUCCESSFUL if key.get_base64() == self.owner.client_key.get_base64()
                else paramiko.AUTH_FAILED)

    def check_channel_request(self, kind: str, chanid: int) -> int:
        return paramiko.OPEN_SUCCEEDED if kind == "session" else paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED

    def check_channel_exec_request(self, channel: paramiko.Channel, command: bytes) -> bool:
        self.owner.commands.append(command.decode())
        return True  # accepted, and left running


class SshServer:
    """`with SshServer(client_key) as server:` serves on server.port until the block ends;
    `server.host_key` is what it presents (assign another to change it)."""

    def __init__(self, client_key: str) -> None:
        self.client_key = paramiko.Ed25519Key.from_private_key(io.StringIO(client_key))
        self.host_key: paramiko.PKey = new_key()
        self.logins: list[str] = []
        self.commands: list[str] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._transports: list[paramiko.Transport] = []

    def __enter__(self) -> SshServer:
        threading.Thread(target=self._serve, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._listener.close()
        self.cut()

    def cut(self) -> None:
        """Drops every connection (the listener stays: a new login works)."""
        for transport in self._transports:
            transport.close()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            transport = paramiko.Transport(conn)
            transport.add_server_key(self.host_key)
            self._transports.append(transport)
            try:
                transport.start_server(server=_Server(self))
            except (paramiko.SSHException, EOFError, OSError):
                transport.close()
