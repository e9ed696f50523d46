"""A connection dropped while a command runs, against a real SSH server (tests/support/
ssh_server.py): the error names the host and what was running, says it may or may not have
finished, and names the command that finds out; and a host resource reports it with its message,
not paramiko's frames."""

from __future__ import annotations

import threading
import traceback

import pytest

from components.hostops.host_resource import HostProvider
from components.hostops.ssh import ConnectionLost, Session
from tests.support.ssh_server import SshServer, new_key_text


@pytest.fixture
def server():
    client_key = new_key_text()
    with SshServer(client_key) as running:
        running.client_key_text = client_key
        yield running


def session(server) -> Session:
    key = server.host_key
    return Session({"host": "127.0.0.1", "port": server.port, "user": "root",
                    "private_key": server.client_key_text,
                    "host_key": f"{key.get_name()} {key.get_base64()}"})


def cut_soon(server) -> None:
    threading.Timer(0.5, server.cut).start()


def test_a_connection_dropped_mid_command_says_where_what_and_how_to_finish(server):
    ssh = session(server)
    cut_soon(server)
    with pytest.raises(ConnectionLost) as lost:
        ssh.run("systemctl restart spear-inference.service")
    message = str(lost.value)
    assert message.startswith(f"the SSH connection to root@127.0.0.1:{server.port} was lost while"
                              " `systemctl restart spear-inference.service` ran")
    assert "may or may not have finished" in message and "`pulumi up --refresh`" in message
    assert server.commands == ["systemctl restart spear-inference.service"]


def test_later_steps_on_the_dropped_connection_fail_the_same_way(server):
    ssh = session(server)
    server.cut()
    with pytest.raises(ConnectionLost, match="was lost while GET /health was asked of port 8080"):
        ssh.http(8080, "GET", "/health")
    with pytest.raises(ConnectionLost, match="was lost while `mkdir -p /opt/spear/config` ran"):
        ssh.write("/opt/spear/config/server.conf", "ctx-size = 512\n")


class Restarting(HostProvider):
    def __init__(self, server) -> None:
        self.server = server

    def resource_id(self, props):
        return "unit"

    def apply(self, props, olds):
        with session(self.server) as ssh:
            cut_soon(self.server)
            ssh.run("systemctl restart spear-inference.service")
        return props


def test_a_resource_reports_a_lost_connection_with_its_message_not_paramikos_frames(server):
    with pytest.raises(ConnectionLost) as lost:
        Restarting(server).create({})
    frames = traceback.extract_tb(lost.value.__traceback__)
    assert [f.name for f in frames][-3:] == [
        "test_a_resource_reports_a_lost_connection_with_its_message_not_paramikos_frames",
        "create", "_applied"]  # nothing of apply's, Session's or paramiko's
    assert lost.value.__cause__ is None and lost.value.__suppress_context__
