"""A real SSH server for unit tests of host-key checks and dropped connections: paramiko's
server side on 127.0.0.1, with a host key the test chooses (and may change), accepting one client
key. It records every login attempt, so a test can show that a refused host key stopped the
connection before the login (nothing of the client's was sent). A command it is asked to run
never finishes: `cut()` drops every connection meanwhile, as a network fault would. A channel to
a port (direct-tcpip) reaches that port on this machine, as sshd's reach the host's."""

from __future__ import annotations

import contextlib
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

    def check_channel_direct_tcpip_request(self, chanid: int, origin: tuple[str, int],
                                           destination: tuple[str, int]) -> int:
        # Connected before the channel opens, as sshd does: a refusal refuses the channel.
        try:
            target = socket.create_connection(destination, timeout=5)
        except OSError:
            return paramiko.OPEN_FAILED_CONNECT_FAILED
        target.settimeout(None)  # the timeout was the connect's: a server may think for longer
        self.owner.targets[chanid] = target
        return paramiko.OPEN_SUCCEEDED


class SshServer:
    """`with SshServer(client_key) as server:` serves on server.port until the block ends;
    `server.host_key` is what it presents (assign another to change it)."""

    def __init__(self, client_key: str) -> None:
        self.client_key = paramiko.Ed25519Key.from_private_key(io.StringIO(client_key))
        self.host_key: paramiko.PKey = new_key()
        self.logins: list[str] = []
        self.commands: list[str] = []
        self.targets: dict[int, socket.socket] = {}  # by channel id, until the channel is relayed
        # The transport holds its channels weakly: an accepted one nobody holds would close.
        self._channels: list[paramiko.Channel] = []
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
                continue
            threading.Thread(target=self._accept, args=(transport,), daemon=True).start()

    def _accept(self, transport: paramiko.Transport) -> None:
        while transport.is_active():
            channel = transport.accept(timeout=0.5)
            if channel is None:
                continue
            self._channels.append(channel)
            if (target := self.targets.pop(channel.get_id(), None)) is not None:
                threading.Thread(target=_relay, args=(channel, target), daemon=True).start()


def _relay(channel: paramiko.Channel, target: socket.socket) -> None:
    """Bytes both ways until the target closes its side (as a server does after its answer)."""
    threading.Thread(target=_pipe, args=(channel, target), daemon=True).start()
    _pipe(target, channel)
    channel.close()
    target.close()


def _pipe(source: paramiko.Channel | socket.socket, sink: paramiko.Channel | socket.socket) -> None:
    with contextlib.suppress(OSError, EOFError):
        while data := source.recv(65536):
            sink.sendall(data)
        sink.shutdown(socket.SHUT_WR)
