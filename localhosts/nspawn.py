"""Local "real systemd hosts": Debian bookworm booted with systemd-nspawn, reachable by SSH.

Each host is a full systemd (cgroup v2) system sharing the machine's network namespace; its sshd
listens only on 127.0.0.1:<ssh_port> and accepts only that host's own ed25519 key for root.
The debootstrapped root filesystem is cached as a content-keyed tarball under
`$SPEAR_CACHE/rootfs/`; every host gets its own copy under `$SPEAR_CACHE/hosts/<name>/root`.

CLI (prints HostInfo as JSON on stdout, progress on stderr):
    python -m localhosts.nspawn up NAME --ssh-port P [--bind SRC:DST ...] [--keep]
    python -m localhosts.nspawn down NAME
    python -m localhosts.nspawn status NAME
    python -m localhosts.nspawn rootfs
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import errno
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import paramiko
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from spear.cache import cache_dir

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
PACKAGES = (
    "systemd", "systemd-sysv", "dbus", "openssh-server", "python3", "build-essential", "cmake",
    "git", "curl", "ca-certificates", "ccache", "procps", "iproute2",
)
# Bump whenever _configure_rootfs (or the debootstrap invocation) changes: it is part of the
# cache key, so stale tarballs are never reused.
RECIPE_VERSION = 2

# Units that hang or fail in a container sharing the machine's network, or that would make the
# hosts non-deterministic (background apt runs).
MASKED_UNITS = (
    "getty.target",
    "console-getty.service",
    "systemd-networkd-wait-online.service",
    "apt-daily.timer",
    "apt-daily-upgrade.timer",
)

# (host command, Debian package providing it)
HOST_TOOLS = (
    ("debootstrap", "debootstrap"),
    ("systemd-nspawn", "systemd-container"),
    ("zstd", "zstd"),
)

BOOT_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0
KILL_TIMEOUT = 10.0
# Each host's nspawn runs in <cgroup hierarchy>/CGROUP_PARENT/<name>: with --keep-unit nspawn puts
# its payload/ and supervisor/ cgroups under the cgroup it was started in, so two hosts started
# from the same cgroup would share (and fight over) one system.slice tree.
CGROUP_PARENT = "spear-fleet"
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
# Archive flags shared by create and extract so file capabilities, ACLs and ownership survive.
TAR_FLAGS = ("--numeric-owner", "--xattrs", "--xattrs-include=*", "--acls", "-I", "zstd -T0")


class HostError(RuntimeError):
    """A host could not be built, started, found or stopped; the message says why."""


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


def _log(msg: str) -> None:
    # stderr, so that the CLI's stdout stays pure JSON for the shell scripts that parse it.
    print(f"[nspawn] {msg}", file=sys.stderr, flush=True)



def _host_dir(name: str) -> Path:
    if not NAME_RE.match(name):
        raise HostError(f"invalid host name {name!r}: must match {NAME_RE.pattern} (it becomes the hostname)")
    return cache_dir() / "hosts" / name


def _run(cmd: Sequence[str], **kwargs) -> None:
    _log("$ " + shlex.join(cmd))
    # Tool output goes to stderr too: `up` and `rootfs` print their result on stdout.
    subprocess.run(cmd, check=True, stdout=sys.stderr, **kwargs)


def ensure_host_tools() -> None:
    """Install missing host tools with apt-get (CI starts from a clean Debian machine, as root)."""
    missing = sorted({pkg for cmd, pkg in HOST_TOOLS if shutil.which(cmd) is None})
    if not missing:
        return
    _log(f"installing missing host packages: {' '.join(missing)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    _run(["apt-get", "update"], env=env)
    _run(["apt-get", "install", "-y", "--no-install-recommends", *missing], env=env)


def rootfs_key() -> str:
    recipe = {"suite": SUITE, "packages": sorted(PACKAGES), "recipe": RECIPE_VERSION}
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


def ensure_rootfs() -> Path:
    """Return the cached rootfs tarball, debootstrapping it first if needed (~3 min, once)."""
    ensure_host_tools()
    rootfs_dir = cache_dir() / "rootfs"
    tarball = rootfs_dir / f"{SUITE}-{rootfs_key()}.tar.zst"
    if tarball.exists():
        return tarball
    rootfs_dir.mkdir(parents=True, exist_ok=True)
    # Parallel callers (several pytest workers, `up` of several hosts) must not debootstrap twice.
    with open(rootfs_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if tarball.exists():
            return tarball
        started = time.monotonic()
        with tempfile.TemporaryDirectory(dir=rootfs_dir, prefix=".build-") as tmp:
            root = Path(tmp) / "root"
            _run(["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}",
                  SUITE, str(root), MIRROR])
            _configure_rootfs(root)
            partial = tarball.with_name(tarball.name + ".partial")
            _run(["tar", *TAR_FLAGS, "-C", str(root), "-cf", str(partial), "."])
            partial.rename(tarball)  # atomic: a tarball that exists is complete
        _log(f"built {tarball} in {time.monotonic() - started:.0f}s")
    return tarball


def _configure_rootfs(root: Path) -> None:
    """Host-independent configuration baked into the tarball (per-host parts happen at `up`)."""
    sshd_d = root / "etc/ssh/sshd_config.d"
    sshd_d.mkdir(parents=True, exist_ok=True)
    (sshd_d / "00-spear.conf").write_text(
        "PermitRootLogin prohibit-password\n"
        "PubkeyAuthentication yes\n"
        "PasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\n"
        "HostKey /etc/ssh/ssh_host_ed25519_key\n"
    )
    # The openssh-server postinst generated host keys: a key shared by every host is wrong, so
    # each host gets its own at `up`.
    for key in (root / "etc/ssh").glob("ssh_host_*"):
        key.unlink()
    # Every host writes its own machine-id at `up`; a shared one would confuse journald/dbus.
    (root / "etc/machine-id").write_text("")
    dbus_id = root / "var/lib/dbus/machine-id"
    if dbus_id.exists() or dbus_id.is_symlink():
        dbus_id.unlink()
    units = root / "etc/systemd/system"
    for unit in MASKED_UNITS:
        link = units / unit
        if link.exists() or link.is_symlink():
            link.unlink()
        link.symlink_to("/dev/null")
    for deb in (root / "var/cache/apt/archives").glob("*.deb"):
        deb.unlink()
    shutil.rmtree(root / "var/lib/apt/lists", ignore_errors=True)
    (root / "var/lib/apt/lists/partial").mkdir(parents=True)


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


def _extract(tarball: Path, root: Path) -> None:
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    started = time.monotonic()
    subprocess.run(["tar", *TAR_FLAGS, "-C", str(root), "-xpf", str(tarball)], check=True)
    _log(f"extracted {tarball.name} into {root} in {time.monotonic() - started:.1f}s")


def _configure_host(name: str, root: Path, ssh_port: int) -> None:
    """Per-host identity: host key, root's authorised key, sshd port, hostname, machine-id."""
    hdir = _host_dir(name)
    client_pub = _keypair(hdir / "id_ed25519")
    ssh_dir = root / "root/.ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    (ssh_dir / "authorized_keys").write_text(client_pub + "\n")
    (ssh_dir / "authorized_keys").chmod(0o600)

    host_pub = _keypair(root / "etc/ssh/ssh_host_ed25519_key")
    # Shared network namespace: listening on anything but loopback would expose the host.
    (root / "etc/ssh/sshd_config.d/10-spear-listen.conf").write_text(f"ListenAddress 127.0.0.1:{ssh_port}\n")
    (hdir / "known_hosts").write_text(f"[127.0.0.1]:{ssh_port} {host_pub}\n")

    (root / "etc/hostname").write_text(name + "\n")
    (root / "etc/hosts").write_text(
        f"127.0.0.1 localhost\n127.0.1.1 {name}\n::1 localhost ip6-localhost ip6-loopback\n")
    machine_id = root / "etc/machine-id"
    if not machine_id.read_text().strip():
        machine_id.write_text(uuid.uuid4().hex + "\n")


def _cgroup_mounts() -> dict[str, str]:
    """Mounted cgroup hierarchies: mount point -> filesystem type (cgroup or cgroup2)."""
    mounts = {}
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, target, fstype, *_ = line.split()
        if fstype in ("cgroup", "cgroup2"):
            mounts[target] = fstype
    return mounts


def _host_cgroup(name: str) -> Path:
    """Create (empty) and return the host's own cgroup v2 directory for its nspawn process."""
    unified = [Path(target) for target, fstype in _cgroup_mounts().items() if fstype == "cgroup2"]
    if not unified:
        raise HostError("no cgroup2 hierarchy mounted: the hosts' systemd needs cgroup v2")
    _remove_host_cgroups(name)  # leftovers of a killed host
    cgroup = unified[0] / CGROUP_PARENT / name
    cgroup.mkdir(parents=True, exist_ok=True)
    return cgroup


def _remove_host_cgroups(name: str) -> None:
    """Remove the host's (empty) cgroups, in every hierarchy: on hybrid machines nspawn mirrors
    them into name=systemd (v1)."""
    tops = [Path(target) / CGROUP_PARENT / name for target in _cgroup_mounts()]
    deadline = time.monotonic() + KILL_TIMEOUT
    while True:
        busy = []
        for top in filter(Path.is_dir, tops):
            for dirpath, _, _ in os.walk(top, topdown=False):
                try:
                    os.rmdir(dirpath)
                except OSError as exc:
                    if exc.errno != errno.EBUSY:
                        raise
                    busy.append(dirpath)
        if not busy:
            return
        if time.monotonic() >= deadline:
            # A killed container's init stays a zombie until PID 1 reaps it, keeping its v1 cgroup
            # busy; an empty cgroup left behind is harmless and is reused by the next start.
            _log(f"warning: cgroups still busy, left in place: {' '.join(busy)}")
            return
        time.sleep(0.2)


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
                _log(f"warning: host {info.name!r} is degraded; failed units:\n{failed}")
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
                        f"stop it first: python -m localhosts.nspawn down {name}")
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
        _extract(tarball, root)
        extracted.write_text(tarball.name + "\n")
    _configure_host(name, root, ssh_port)
    (hdir / "host.json").write_text(json.dumps(request) + "\n")

    cmd = ["systemd-nspawn", "--boot", f"--directory={root}", "--register=no", "--keep-unit",
           f"--machine={name}", *(f"--bind={src}:{dst}" for src, dst in binds)]
    # PID 1 of this machine is not systemd: --register=no/--keep-unit avoid machined and scope
    # units; the unified hierarchy gives the container's systemd a pure cgroup v2 tree.
    env = dict(os.environ, SYSTEMD_NSPAWN_UNIFIED_HIERARCHY="1")
    _log("$ " + shlex.join(cmd))
    # nspawn must already be in the host's own cgroup when it starts, as it builds its tree in
    # its current cgroup: a shell joins it and execs nspawn (keeping the pid); preexec_fn would
    # not be safe with the paramiko threads of other hosts running.
    join_and_exec = 'echo $$ > "$0" && exec "$@"'
    with open(hdir / "console.log", "wb") as console:
        # Own session: the host outlives the CLI process and is not hit by the terminal's ^C.
        proc = subprocess.Popen(["sh", "-c", join_and_exec, str(_host_cgroup(name) / "cgroup.procs"), *cmd],
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
    _log(f"host {name!r} up (ssh root@127.0.0.1 -p {ssh_port}) after {time.monotonic() - started:.1f}s")
    return info


def _wait_exit(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


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


def stop_host(name: str, timeout: float = STOP_TIMEOUT) -> None:
    """Power the host off cleanly; kill it if it does not stop within `timeout` seconds."""
    pid = _running_pid(name)
    if pid is not None:
        # systemd-nspawn turns the first SIGTERM into SIGRTMIN+3 for the container's systemd (a
        # clean poweroff) and a second one into an immediate kill of the container.
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        if not _wait_exit(pid, timeout):
            _log(f"host {name!r} did not power off within {timeout:.0f}s; terminating it")
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        if not _wait_exit(pid, KILL_TIMEOUT):
            _log(f"systemd-nspawn of host {name!r} did not exit; killing it")
            _kill_container(pid)
            if not _wait_exit(pid, KILL_TIMEOUT):
                raise HostError(f"systemd-nspawn (pid {pid}) of host {name!r} survived SIGKILL")
        _children.pop(pid, None)
        _log(f"host {name!r} stopped")
    else:
        _log(f"host {name!r} is not running")
    _remove_host_cgroups(name)
    (_host_dir(name) / "nspawn.pid").unlink(missing_ok=True)


def _bind_arg(value: str) -> tuple[str, str]:
    src, sep, dst = value.partition(":")
    if not sep:
        raise argparse.ArgumentTypeError(f"expected SRC:DST, got {value!r}")
    return src, dst


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localhosts.nspawn", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="boot a host and print its HostInfo as JSON")
    up.add_argument("name")
    up.add_argument("--ssh-port", type=int, required=True)
    up.add_argument("--bind", type=_bind_arg, action="append", default=[], metavar="SRC:DST")
    up.add_argument("--keep", action="store_true", help="reuse the existing root filesystem (fresh=False)")
    sub.add_parser("down", help="power a host off").add_argument("name")
    status = sub.add_parser("status", help="print HostInfo as JSON (null and exit 1 if not running)")
    status.add_argument("name")
    sub.add_parser("rootfs", help="build the cached rootfs tarball if needed and print its path")
    args = parser.parse_args(argv)

    try:
        if args.command == "up":
            info = start_host(args.name, args.ssh_port, args.bind, fresh=not args.keep)
            print(json.dumps(info.as_dict(), indent=2))
        elif args.command == "down":
            stop_host(args.name)
        elif args.command == "status":
            info = host_status(args.name)
            print(json.dumps(info and info.as_dict(), indent=2))
            return 0 if info else 1
        else:
            print(ensure_rootfs())
    except HostError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
