"""A local host's life: boot it with systemd-nspawn, wait until it is ready, power it off.

Each host is a full systemd (cgroup v2) system sharing the machine's network namespace; its sshd
listens only on 127.0.0.1:<ssh_port> and accepts only that host's own ed25519 key for root.
Every host gets its own copy of the cached root filesystem (localhosts/hosts/rootfs.py) under
`$SPEAR_CACHE/hosts/<name>/root`, and its own cgroup (localhosts/hosts/cgroups.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import paramiko
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from components.cache import cache_dir
from components.hostops.waiting import wait_until
from localhosts.hosts.cgroups import host_cgroup, remove_host_cgroups
from localhosts.report import HostError, log
from localhosts.hosts.rootfs import ensure_rootfs, extract_rootfs

BOOT_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0
KILL_TIMEOUT = 10.0
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


@dataclass(frozen=True, kw_only=True)
class HostInfo:
    name: str
    ssh_host: str = "127.0.0.1"
    ssh_port: int
    user: str = "root"
    private_key_path: Path
    root_dir: Path
    pid: int

    def as_dict(self) -> dict:
        return {k: str(v) if isinstance(v, Path) else v for k, v in dataclasses.asdict(self).items()}

    def connection(self) -> dict:
        """The host as a resource's `connection` (components/hostops/ssh.py), host key included."""
        return {"host": self.ssh_host, "port": self.ssh_port, "user": self.user,
                "private_key": self.private_key_path.read_text(), "host_key": host_key(self.name)}


def _host_dir(name: str) -> Path:
    if not NAME_RE.match(name):
        raise HostError(f"invalid host name {name!r}: must match {NAME_RE.pattern} (it becomes the hostname)")
    return cache_dir() / "hosts" / name


def _keypair(private_path: Path) -> str:
    """Create an OpenSSH ed25519 key pair at private_path (+ .pub) unless it exists.

    Returns the public key line.
    """
    public_path = private_path.with_name(private_path.name + ".pub")
    if not (private_path.exists() and public_path.exists()):
        key = Ed25519PrivateKey.generate()
        # Created 0600 from the start: ssh/sshd refuse private keys readable by others.
        with open(private_path, "wb", opener=lambda path, flags: os.open(path, flags, 0o600)) as private:
            private.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                            serialization.NoEncryption()))
        public_path.write_bytes(key.public_key().public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH) + b"\n")
    return public_path.read_text().strip()


def _parse_binds(binds: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    parsed = []
    for src, dst in binds:
        src_path = Path(src).resolve()
        if not src_path.exists():
            raise HostError(f"bind source {src} does not exist")
        if not dst.startswith("/"):
            raise HostError(f"bind destination {dst!r} must be an absolute path inside the host")
        if ":" in str(src_path) + dst:
            raise HostError(f"bind paths must not contain ':' (systemd-nspawn separator): {src}:{dst}")
        parsed.append((str(src_path), dst))
    return parsed


# nspawn processes started by this Python process, by pid: polling them reaps them (no zombie,
# no "still running" ResourceWarning). Hosts started by another process (the CLI) are looked up
# in /proc.
_children: dict[int, subprocess.Popen] = {}


def _alive(pid: int) -> bool:
    if pid in _children:
        return _children[pid].poll() is None
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _running_pid(name: str) -> int | None:
    """The pid of this host's systemd-nspawn, if running (guards against a recycled stale pid)."""
    try:
        pid = int((_host_dir(name) / "nspawn.pid").read_text())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (FileNotFoundError, ValueError):
        return None
    if not cmdline[0].endswith(b"systemd-nspawn") or f"--machine={name}".encode() not in cmdline:
        return None
    return pid if _alive(pid) else None


def host_status(name: str) -> HostInfo | None:
    """HostInfo of a running host, or None if it is not running."""
    pid = _running_pid(name)
    if pid is None:
        return None
    hdir = _host_dir(name)
    state = json.loads((hdir / "host.json").read_text())
    return HostInfo(name=name, ssh_port=state["ssh_port"], private_key_path=hdir / "id_ed25519",
                    root_dir=hdir / "root", pid=pid)


def _check_port_free(port: int) -> None:
    with socket.socket() as sock:
        # SO_REUSEADDR like sshd: only a real listener (not a TIME_WAIT leftover) is a conflict.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
            return
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
    owners = [p.parent.name for p in (cache_dir() / "hosts").glob("*/host.json")
              if json.loads(p.read_text())["ssh_port"] == port and _running_pid(p.parent.name)]
    owner = (f"by spear host {owners[0]!r}" if owners
             else f"by another process (see: ss -ltnp 'sport = :{port}')")
    raise HostError(f"port 127.0.0.1:{port} is already in use {owner}; choose another --ssh-port")


def _console_tail(name: str, lines: int = 40) -> str:
    try:
        text = (_host_dir(name) / "console.log").read_text(errors="replace")
    except FileNotFoundError:
        return "(no console log)"
    return "\n".join(text.splitlines()[-lines:])


HOST_KEY = "ssh_host_ed25519_key"


def renew_host_key(name: str) -> None:
    """Forget host `name`'s host key: its next start makes a new one (a re-created host)."""
    for suffix in ("", ".pub"):
        (_host_dir(name) / f"{HOST_KEY}{suffix}").unlink(missing_ok=True)


def host_key(name: str) -> str:
    """`<type> <base64>` of the host key host `name` presents (after its first start)."""
    return " ".join((_host_dir(name) / f"{HOST_KEY}.pub").read_text().split()[:2])


def _configure_host(name: str, root: Path, ssh_port: int) -> None:
    """Per-host identity: host key, root's authorised key, sshd port, hostname, machine-id."""
    hdir = _host_dir(name)
    client_pub = _keypair(hdir / "id_ed25519")
    ssh_dir = root / "root/.ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    (ssh_dir / "authorized_keys").write_text(client_pub + "\n")
    (ssh_dir / "authorized_keys").chmod(0o600)

    # The host key is the host's identity: kept across fresh starts like the client key, so a
    # stack that recorded it (components/hostops/host_key.py) still knows the host. A host that
    # must look re-created (a new key) is started after renew_host_key.
    host_pub = _keypair(hdir / HOST_KEY)
    for suffix in ("", ".pub"):
        shutil.copy2(hdir / f"{HOST_KEY}{suffix}", root / f"etc/ssh/{HOST_KEY}{suffix}")
    # Shared network namespace: listening on anything but loopback would expose the host.
    (root / "etc/ssh/sshd_config.d/10-spear-listen.conf").write_text(f"ListenAddress 127.0.0.1:{ssh_port}\n")
    (hdir / "known_hosts").write_text(f"[127.0.0.1]:{ssh_port} {host_pub}\n")

    (root / "etc/hostname").write_text(name + "\n")
    (root / "etc/hosts").write_text(
        f"127.0.0.1 localhost\n127.0.1.1 {name}\n::1 localhost ip6-localhost ip6-loopback\n")
    machine_id = root / "etc/machine-id"
    if not machine_id.read_text().strip():
        machine_id.write_text(uuid.uuid4().hex + "\n")


def _connect(info: HostInfo, timeout: float) -> paramiko.SSHClient:
    client = paramiko.SSHClient()
    client.load_host_keys(str(info.private_key_path.with_name("known_hosts")))
    client.connect(info.ssh_host, port=info.ssh_port, username=info.user,
                   key_filename=str(info.private_key_path), look_for_keys=False, allow_agent=False,
                   timeout=timeout, banner_timeout=timeout, auth_timeout=timeout)
    return client


def _output(client: paramiko.SSHClient, command: str, timeout: float) -> str:
    _, stdout, _ = client.exec_command(command, timeout=timeout)
    return stdout.read().decode()


def _wait_ready(info: HostInfo, timeout: float) -> None:
    """Wait until root can log in by key and systemd has finished booting."""
    deadline = time.monotonic() + timeout
    while True:
        if not _alive(info.pid):
            raise HostError(f"systemd-nspawn for {info.name!r} exited during boot; console log tail:\n"
                            + _console_tail(info.name))
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise HostError(f"host {info.name!r} not reachable by SSH on port {info.ssh_port} "
                            f"within {timeout:.0f}s; console log tail:\n" + _console_tail(info.name))
        try:
            client = _connect(info, timeout=min(5.0, remaining))
        except (OSError, EOFError, paramiko.SSHException):
            time.sleep(0.2)
            continue
        with client:
            try:
                state = _output(client, "systemctl is-system-running --wait", remaining).strip()
            except TimeoutError:
                raise HostError(f"host {info.name!r}: systemd did not finish booting within {timeout:.0f}s; "
                                "console log tail:\n" + _console_tail(info.name)) from None
            if state == "degraded":
                failed = _output(client, "systemctl --failed --no-legend --plain", 10.0)
                log(f"warning: host {info.name!r} is degraded; failed units:\n{failed}")
        if state in ("running", "degraded"):
            return
        raise HostError(f"host {info.name!r} finished booting in state {state!r}; console log tail:\n"
                        + _console_tail(info.name))


def start_host(name: str, ssh_port: int, binds: Sequence[tuple[str, str]] = (),
               fresh: bool = True) -> HostInfo:
    """Boot host `name` with sshd on 127.0.0.1:ssh_port and return once it is fully up.

    fresh=True wipes the host's root filesystem and re-extracts it from the cached tarball;
    fresh=False reuses it if present (and returns the running host as is if it was started with
    the same port and binds). The client key pair `hosts/<name>/id_ed25519` is kept across
    fresh starts so that configurations referring to it stay valid.
    """
    hdir = _host_dir(name)
    binds = _parse_binds(binds)
    request = {"ssh_port": ssh_port, "binds": [list(b) for b in binds]}  # as host.json stores it
    running = host_status(name)
    if running is not None:
        if not fresh and json.loads((hdir / "host.json").read_text()) == request:
            _wait_ready(running, BOOT_TIMEOUT)
            return running
        raise HostError(f"host {name!r} is already running (pid {running.pid}, port {running.ssh_port}); "
                        f"stop it first: python -m localhosts.hosts.cli down {name}")
    if not 1 <= ssh_port <= 65535:
        raise HostError(f"invalid ssh port {ssh_port}")
    _check_port_free(ssh_port)

    tarball = ensure_rootfs()
    hdir.mkdir(parents=True, exist_ok=True)
    root = hdir / "root"
    # The marker is written only after a complete extraction, so an interrupted one is redone.
    extracted = hdir / "root.extracted"
    if fresh or not (extracted.exists() and root.is_dir()):
        extracted.unlink(missing_ok=True)
        extract_rootfs(tarball, root)
        extracted.write_text(tarball.name + "\n")
    _configure_host(name, root, ssh_port)
    (hdir / "host.json").write_text(json.dumps(request) + "\n")

    cmd = ["systemd-nspawn", "--boot", f"--directory={root}", "--register=no", "--keep-unit",
           f"--machine={name}", *(f"--bind={src}:{dst}" for src, dst in binds)]
    # PID 1 of this machine is not systemd: --register=no/--keep-unit avoid machined and scope
    # units; the unified hierarchy gives the container's systemd a pure cgroup v2 tree.
    env = dict(os.environ, SYSTEMD_NSPAWN_UNIFIED_HIERARCHY="1")
    log("$ " + shlex.join(cmd))
    # nspawn must already be in the host's own cgroup when it starts, as it builds its tree in
    # its current cgroup: a shell joins it and execs nspawn (keeping the pid); preexec_fn would
    # not be safe with the paramiko threads of other hosts running.
    join_and_exec = 'echo $$ > "$0" && exec "$@"'
    with open(hdir / "console.log", "wb") as console:
        # Own session: the host outlives the CLI process and is not hit by the terminal's ^C.
        proc = subprocess.Popen(["sh", "-c", join_and_exec, str(host_cgroup(name) / "cgroup.procs"), *cmd],
                                env=env, stdin=subprocess.DEVNULL, stdout=console,
                                stderr=subprocess.STDOUT, start_new_session=True)
    _children[proc.pid] = proc
    (hdir / "nspawn.pid").write_text(f"{proc.pid}\n")
    info = HostInfo(name=name, ssh_port=ssh_port, private_key_path=hdir / "id_ed25519", root_dir=root,
                    pid=proc.pid)
    started = time.monotonic()
    try:
        _wait_ready(info, BOOT_TIMEOUT)
    except BaseException:
        stop_host(name)
        raise
    log(f"host {name!r} up (ssh root@127.0.0.1 -p {ssh_port}) after {time.monotonic() - started:.1f}s")
    return info


def _wait_exit(pid: int, timeout: float) -> bool:
    return wait_until(lambda: not _alive(pid), timeout, interval=0.1)


def _kill_container(pid: int) -> None:
    # Killing the container's init (nspawn's child) first takes down its whole PID namespace;
    # killing only nspawn could leave the container running as an orphan.
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(FileNotFoundError):
            for child in (task / "children").read_text().split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(child), signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def stop_host(name: str, timeout: float = STOP_TIMEOUT, discard: bool = False) -> None:
    """Power the host off cleanly; kill it if it does not stop within `timeout` seconds.

    discard=True also deletes its root filesystem (about 1 GiB each; the key pair stays), for
    hosts whose next start is fresh anyway: kept roots once filled CI's disk.
    """
    pid = _running_pid(name)
    if pid is not None:
        # systemd-nspawn turns the first SIGTERM into SIGRTMIN+3 for the container's systemd (a
        # clean poweroff) and a second one into an immediate kill of the container.
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        if not _wait_exit(pid, timeout):
            log(f"host {name!r} did not power off within {timeout:.0f}s; terminating it")
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        if not _wait_exit(pid, KILL_TIMEOUT):
            log(f"systemd-nspawn of host {name!r} did not exit; killing it")
            _kill_container(pid)
            if not _wait_exit(pid, KILL_TIMEOUT):
                raise HostError(f"systemd-nspawn (pid {pid}) of host {name!r} survived SIGKILL")
        _children.pop(pid, None)
        log(f"host {name!r} stopped")
    else:
        log(f"host {name!r} is not running")
    remove_host_cgroups(name)
    hdir = _host_dir(name)
    (hdir / "nspawn.pid").unlink(missing_ok=True)
    if discard:
        (hdir / "root.extracted").unlink(missing_ok=True)
        shutil.rmtree(hdir / "root", ignore_errors=True)
