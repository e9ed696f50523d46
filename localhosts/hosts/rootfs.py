"""The local hosts' Debian root filesystem, debootstrapped once and cached as a tarball.

The tarball is content-keyed (suite, packages, recipe version) under `$SPEAR_CACHE/rootfs/`;
every host gets its own copy of it (see localhosts/hosts/host.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from components.cache import build_once, cache_dir
from localhosts.report import log

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
PACKAGES = (
    "systemd", "systemd-sysv", "dbus", "openssh-server", "python3", "build-essential", "cmake",
    "git", "curl", "ca-certificates", "ccache", "procps", "iproute2",
    "tmux",  # the RunPod test pods start vLLM in a tmux session, as on RunPod
    # The gateway host: LiteLLM's virtualenv, its PostgreSQL, and Node for Prisma's WebAssembly
    # query engine (components/gateway/).
    "python3-venv", "postgresql-15", "nodejs",
)
# Bump whenever _configure_rootfs (or the debootstrap invocation) changes: it is part of the
# cache key, so stale tarballs are never reused.
RECIPE_VERSION = 3

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

# Archive flags shared by create and extract so file capabilities, ACLs and ownership survive.
TAR_FLAGS = ("--numeric-owner", "--xattrs", "--xattrs-include=*", "--acls", "-I", "zstd -T0")


def _run(cmd: Sequence[str], **kwargs) -> None:
    log("$ " + shlex.join(cmd))
    # Tool output goes to stderr too: `up` and `rootfs` print their result on stdout.
    subprocess.run(cmd, check=True, stdout=sys.stderr, **kwargs)


def ensure_host_tools() -> None:
    """Install missing host tools with apt-get (CI starts from a clean Debian machine, as root)."""
    missing = sorted({pkg for cmd, pkg in HOST_TOOLS if shutil.which(cmd) is None})
    if not missing:
        return
    log(f"installing missing host packages: {' '.join(missing)}")
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
    build_once(tarball, lambda: _build_rootfs(tarball), "the hosts' Debian root filesystem")
    return tarball


def _build_rootfs(tarball: Path) -> None:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(dir=tarball.parent, prefix=".build-") as tmp:
        root = Path(tmp) / "root"
        _run(["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}",
              SUITE, str(root), MIRROR])
        _configure_rootfs(root)
        partial = tarball.with_name(tarball.name + ".partial")
        _run(["tar", *TAR_FLAGS, "-C", str(root), "-cf", str(partial), "."])
        partial.rename(tarball)  # atomic: a tarball that exists is complete
    log(f"built {tarball} in {time.monotonic() - started:.0f}s")


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
    # No PostgreSQL cluster in the image: the hosts share this machine's network, so a cluster
    # on 5432 in every host would collide; the gateway creates its own on its configured port.
    (root / "etc/postgresql-common/createcluster.d").mkdir(parents=True, exist_ok=True)
    (root / "etc/postgresql-common/createcluster.d/spear.conf").write_text(
        "create_main_cluster = false\n")
    shutil.rmtree(root / "etc/postgresql/15/main", ignore_errors=True)
    shutil.rmtree(root / "var/lib/postgresql/15/main", ignore_errors=True)
    for deb in (root / "var/cache/apt/archives").glob("*.deb"):
        deb.unlink()
    shutil.rmtree(root / "var/lib/apt/lists", ignore_errors=True)
    (root / "var/lib/apt/lists/partial").mkdir(parents=True)


def extract_rootfs(tarball: Path, root: Path) -> None:
    """Replace the folder `root` with a fresh copy of the root filesystem in `tarball`."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    started = time.monotonic()
    subprocess.run(["tar", *TAR_FLAGS, "-C", str(root), "-xpf", str(tarball)], check=True)
    log(f"extracted {tarball.name} into {root} in {time.monotonic() - started:.1f}s")
