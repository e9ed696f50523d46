"""Integration tests for localhosts/ (host.py, cli.py): real Debian hosts booted with systemd-nspawn."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import paramiko
import pytest

from localhosts.hosts.cgroups import CGROUP_PARENT
from localhosts.hosts.host import HostInfo, host_status, start_host, stop_host
from localhosts.report import HostError
from localhosts.engine import REPO
from localhosts.servers.processes import free_port


BIND_DST = "/mnt/spear-bind"


def _port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _ssh(info: HostInfo, command: str) -> str:
    """Run `command` on the host as a consumer would: key login, host key checked via known_hosts."""
    client = paramiko.SSHClient()
    client.load_host_keys(str(info.private_key_path.with_name("known_hosts")))
    client.connect(info.ssh_host, port=info.ssh_port, username=info.user,
                   key_filename=str(info.private_key_path), look_for_keys=False, allow_agent=False,
                   timeout=10)
    with client:
        _, stdout, stderr = client.exec_command(command, timeout=60)
        out = stdout.read().decode()
        status = stdout.channel.recv_exit_status()
        assert status == 0, f"{command!r} exited {status}: {stderr.read().decode()}"
        return out


def _processes_of(info: HostInfo) -> list[int]:
    """Live pids of the host's nspawn and of every process in the host's cgroups (the container).

    Zombies are skipped: a host started by another process (the CLI) is an orphan whose exit
    status only PID 1 can collect.
    """
    cgroup = f"/{CGROUP_PARENT}/{info.name}/"
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            cgroups = (proc / "cgroup").read_text()
        except OSError:  # exited meanwhile
            continue
        if state != "Z" and (f"--machine={info.name}".encode() in cmdline or cgroup in cgroups):
            pids.append(int(proc.name))
    return pids


@pytest.fixture(scope="module")
def bind_dir(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("bind")
    (path / "hello.txt").write_text("from the machine\n")
    return path


@pytest.fixture(scope="module")
def host(bind_dir):
    info = start_host("pytest-a", free_port(), binds=[(str(bind_dir), BIND_DST)])
    yield info
    stop_host(info.name, discard=True)


def test_systemd_boots_to_running(host):
    assert _ssh(host, "systemctl is-system-running || true").strip() in ("running", "degraded")
    assert host_status(host.name) == host


def test_system_unit_runs_in_its_own_cgroup_v2(host):
    assert _ssh(host, "stat -fc %T /sys/fs/cgroup").strip() == "cgroup2fs"
    _ssh(host, "printf '[Service]\\nExecStart=/bin/sleep infinity\\n' > /etc/systemd/system/t.service"
               " && systemctl daemon-reload && systemctl start t.service")
    main_pid = _ssh(host, "systemctl show -P MainPID t.service").strip()
    assert int(main_pid) > 0
    cgroup = _ssh(host, f"cat /proc/{main_pid}/cgroup").splitlines()
    assert "0::/system.slice/t.service" in cgroup


def test_sshd_listens_only_on_loopback_port(host):
    listeners = {line.split()[3] for line in _ssh(host, "ss -Hltnp").splitlines() if '"sshd"' in line}
    assert listeners == {f"127.0.0.1:{host.ssh_port}"}


def test_bind_mount_is_shared(host, bind_dir):
    assert _ssh(host, f"cat {BIND_DST}/hello.txt") == "from the machine\n"
    _ssh(host, f"echo from the host > {BIND_DST}/reply.txt")
    assert (bind_dir / "reply.txt").read_text() == "from the host\n"


def test_second_host_runs_alongside_stops_cleanly_and_can_discard_its_disk(host):
    other = start_host("pytest-b", free_port())
    try:
        assert _ssh(other, "hostname").strip() == "pytest-b"
        assert _ssh(host, "hostname").strip() == "pytest-a"
        assert _ssh(other, "cat /etc/machine-id") != _ssh(host, "cat /etc/machine-id")
    finally:
        stop_host(other.name, discard=True)
    assert not other.root_dir.exists() and other.private_key_path.exists()
    assert _processes_of(other) == []
    assert _port_is_free(other.ssh_port)
    assert host_status(other.name) is None
    assert host_status(host.name) == host


def test_port_in_use_is_explained():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(HostError, match=f"127.0.0.1:{port} is already in use"):
            start_host("pytest-c", port)


def test_cli_up_status_down():
    """The CLI used by the local stack: JSON on stdout, and `down` from another process."""
    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "localhosts.hosts.cli", *args], cwd=REPO,
                              capture_output=True, text=True, timeout=300)

    port = free_port()
    up = cli("up", "pytest-cli", "--ssh-port", str(port))
    try:
        assert up.returncode == 0, up.stderr
        printed = json.loads(up.stdout)
        info = host_status("pytest-cli")
        assert info is not None and printed == info.as_dict()
        assert printed["ssh_port"] == port and printed["user"] == "root"
        assert _ssh(info, "hostname").strip() == "pytest-cli"
        status = cli("status", "pytest-cli")
        assert status.returncode == 0 and json.loads(status.stdout) == printed
    finally:
        down = cli("down", "pytest-cli", "--discard")
    assert down.returncode == 0, down.stderr
    status = cli("status", "pytest-cli")
    assert status.returncode == 1 and json.loads(status.stdout) is None
    assert _processes_of(info) == []
    assert _port_is_free(port)
    assert not info.root_dir.exists()
