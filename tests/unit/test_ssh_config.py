"""An SSH host may be an ~/.ssh/config alias: the connection is made as `ssh <alias>` would make
it, with the stack's own values first (a temporary ssh_config file stands in for ~/.ssh/config)."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.hostops.ssh import SSH_CONFIG_ENV, RemoteError, resolve_connection
from tests.support.stack_files import DUMMY_KEY


@pytest.fixture
def ssh_config(tmp_path: Path) -> Path:
    key = tmp_path / "id_reds"
    key.write_text(DUMMY_KEY)
    config = tmp_path / "ssh_config"
    config.write_text(f"""\
Host reds
    HostName reds.internal
    Port 2202
    User spear
    IdentityFile {tmp_path}/absent_key
    IdentityFile {key}

Host bare
    HostName 10.0.0.9
""")
    return config


def connection(host: str, port: int | None = None, user: str | None = None,
               private_key: str | None = None) -> dict:
    return {"host": host, "port": port, "user": user, "private_key": private_key}


def test_an_alias_gives_its_host_name_port_user_and_first_existing_identity_file(ssh_config):
    assert resolve_connection(connection("reds"), str(ssh_config)) == {
        "host": "reds.internal", "port": 2202, "user": "spear", "private_key": DUMMY_KEY}


def test_what_the_stack_gives_wins_over_the_alias(ssh_config):
    given = connection("reds", port=22, user="root", private_key="the stack's key")
    assert resolve_connection(given, str(ssh_config)) == {
        "host": "reds.internal", "port": 22, "user": "root", "private_key": "the stack's key"}


def test_a_host_without_an_entry_is_itself_on_port_22_as_root(ssh_config, tmp_path):
    given = connection("127.0.0.1", private_key="k")
    expected = {"host": "127.0.0.1", "port": 22, "user": "root", "private_key": "k"}
    assert resolve_connection(given, str(ssh_config)) == expected
    assert resolve_connection(given, str(tmp_path / "no_such_file")) == expected


def test_no_key_anywhere_is_refused_naming_the_host_and_the_file(ssh_config):
    with pytest.raises(RemoteError, match=f"^no SSH key for bare: the stack gives none .* and"
                                          f" {ssh_config} names no IdentityFile for it that exists"):
        resolve_connection(connection("bare"), str(ssh_config))


def test_the_file_may_be_named_by_the_environment(ssh_config, monkeypatch):
    monkeypatch.setenv(SSH_CONFIG_ENV, str(ssh_config))
    assert resolve_connection(connection("bare", private_key="k"))["host"] == "10.0.0.9"
