"""SSH host keys, against a real SSH server (tests/support/ssh_server.py): a host must present the
key the stack pins or recorded, or the one known_hosts has for it (an ssh_config alias by the
host it names); another key, or a host nothing knows, is refused at the handshake, before the
login, naming the host and both fingerprints as ssh-keygen prints them. HostKey records the key
at first contact and refuses another from then on; ssh.hostKey is checked in the config."""

from __future__ import annotations

import subprocess

import pytest

from components.hostops.host_key import HostKeyProvider
from components.hostops.known_hosts import fingerprint, known_hosts_line, parse
from components.hostops.ssh import HostKeyRefused, Session
from config.checker import ConfigError
from config.load import parse_stack as parse_config
from spear.rules import host_key_normal
from tests.support.config_cases import changed
from tests.support.ssh_server import SshServer, new_key, new_key_text
from tests.support.stack_files import local_inference_hosts


def text(key) -> str:
    return f"{key.get_name()} {key.get_base64()}"


@pytest.fixture
def client_key() -> str:
    return new_key_text()


@pytest.fixture
def server(client_key, monkeypatch, tmp_path):
    # No known_hosts or ssh_config of this machine's decides anything here.
    monkeypatch.setenv("SPEAR_KNOWN_HOSTS", str(tmp_path / "known_hosts"))
    monkeypatch.setenv("SPEAR_SSH_CONFIG", str(tmp_path / "ssh_config"))
    with SshServer(client_key) as running:
        yield running


def connection(server, client_key, **extra):
    return {"host": "127.0.0.1", "port": server.port, "user": "root", "private_key": client_key,
            **extra}


def test_the_pinned_key_lets_the_login_through(server, client_key):
    with Session(connection(server, client_key, host_key=text(server.host_key))) as session:
        assert text(session.host_key) == text(server.host_key)
    assert server.logins == ["root"]


def test_another_key_is_refused_before_the_login_naming_both_fingerprints(server, client_key):
    other = new_key()
    with pytest.raises(HostKeyRefused) as refused:
        Session(connection(server, client_key, host_key=text(other)))
    message = str(refused.value)
    assert f"root@127.0.0.1:{server.port}" in message
    assert f"expected {fingerprint(other)}, presented {fingerprint(server.host_key)}" in message
    assert "nothing was sent" in message
    assert server.logins == []  # the client's key never went out


def test_a_host_nothing_knows_is_refused_unless_it_is_the_first_contact(server, client_key):
    with pytest.raises(HostKeyRefused, match="no SSH host key is known"):
        Session(connection(server, client_key))
    assert server.logins == []
    with Session(connection(server, client_key), first_contact=True) as session:
        assert (text(session.host_key), session.trusted) == (text(server.host_key), "first use")


def test_known_hosts_decides_without_a_pinned_key(server, client_key, tmp_path):
    known = tmp_path / "known_hosts"
    known.write_text(known_hosts_line("127.0.0.1", server.port, text(server.host_key)))
    with Session(connection(server, client_key)) as session:
        assert session.trusted == str(known)
    known.write_text(known_hosts_line("127.0.0.1", server.port, text(new_key())))
    with pytest.raises(HostKeyRefused, match="is not the expected one"):
        Session(connection(server, client_key), first_contact=True)  # known: no first use


def test_an_alias_is_checked_by_the_host_its_ssh_config_entry_names(server, client_key, tmp_path):
    (tmp_path / "ssh_config").write_text(f"Host gpu-box\n  HostName 127.0.0.1\n  Port {server.port}\n")
    (tmp_path / "known_hosts").write_text(
        known_hosts_line("127.0.0.1", server.port, text(server.host_key)))
    with Session({"host": "gpu-box", "port": None, "user": "root",
                  "private_key": client_key}) as session:
        assert "(gpu-box)" in session.where


def test_fingerprints_and_key_lines_read_as_openssh_writes_them(tmp_path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "k")],
                   check=True)
    public = (tmp_path / "k.pub").read_text()
    listed = subprocess.run(["ssh-keygen", "-l", "-f", str(tmp_path / "k.pub")], check=True,
                            capture_output=True, text=True).stdout.split()
    assert fingerprint(parse(public)) == f"ssh-ed25519 {listed[1]}"
    key = " ".join(public.split()[:2])
    assert host_key_normal(f"[10.0.0.5]:2222 {public}") == host_key_normal(public) == key
    assert host_key_normal("ssh-ed25519 AAAAB3NzaC1yc2E=") is None  # an RSA blob, named ed25519
    assert host_key_normal("ssh-ed25519 not-base64") is None


PROPS = {"target": "root@127.0.0.1:22", "pinned": None}


def test_the_record_trusts_the_first_key_and_refuses_another_from_then_on(server, client_key):
    provider = HostKeyProvider()
    props = {**PROPS, "connection": connection(server, client_key)}
    first = provider.apply(dict(props), olds=None)
    assert (first["host_key"], first["trusted"]) == (text(server.host_key), "first use")
    again = provider.apply(dict(props), olds=first)
    assert again["trusted"] == "recorded before"
    server.host_key = new_key()  # the host re-created, or someone else answering there
    with pytest.raises(HostKeyRefused, match="is not the expected one"):
        provider.apply(dict(props), olds=first)


def test_a_pinned_key_is_checked_at_the_first_contact_too(server, client_key):
    provider = HostKeyProvider()
    props = {**PROPS, "connection": connection(server, client_key)}
    with pytest.raises(HostKeyRefused):
        provider.apply({**props, "pinned": text(new_key())}, olds=None)
    pinned = provider.apply({**props, "pinned": text(server.host_key)}, olds=None)
    assert pinned["trusted"] == "pinned (ssh.hostKey)"
    # Another target is another host: the record is made again, not updated.
    assert provider.diff("id", pinned, {**pinned, "target": "root@10.0.0.9:22"}).replaces == ["target"]


def test_ssh_host_key_in_the_config_is_a_host_key_and_kept_normalised(tmp_path):
    raw = local_inference_hosts()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "k")],
                   check=True)
    public = (tmp_path / "k.pub").read_text().strip()
    raw["inferenceHosts"]["local"]["ssh"]["privateKeyPath"] = str(tmp_path / "k")
    pinned = changed(raw, ("inferenceHosts", "local", "ssh", "hostKey"), f"[127.0.0.1]:2222 {public}")
    assert parse_config(pinned).inference_hosts["local"].ssh.host_key == " ".join(public.split()[:2])
    with pytest.raises(ConfigError, match="inferenceHosts.local.ssh.hostKey.*a known_hosts line"):
        parse_config(changed(raw, ("inferenceHosts", "local", "ssh", "hostKey"), "ssh-ed25519 xyz"))
