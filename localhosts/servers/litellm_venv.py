"""LiteLLM virtualenvs on this machine: installed by hosts/gateway/install-litellm.sh with the
offline Prisma engine from the wheelhouse the gateway hosts get (one venv per version, cached
under $SPEAR_CACHE/litellm/), and the prisma-offline bundle they run with, unpacked. The tests'
proxies (localhosts/servers/litellm_proxy.py) and the gateway image (localhosts/images/gateway_image) use
them."""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from components.cache import cache_dir
from components.gateway import offline_engine
from components.gateway.install import INSTALL_SH
from config.schema.gateway import DEFAULT_LITELLM
from localhosts.hosts.wheelhouse import ensure_wheelhouse

# The LiteLLM versions the tests run the gateway on: the default (the cookbook's pin) and the
# upgrade they take it to, the newest whose [proxy] extra installs here.
UPGRADE_LITELLM = "1.108.7"
TESTED_LITELLM = (DEFAULT_LITELLM, UPGRADE_LITELLM)


def offline_bundle_dir() -> Path:
    """The prisma-offline bundle (components/gateway/offline_engine.py makes the tarball the
    gateway hosts get) unpacked once per key into $SPEAR_CACHE/prisma-offline/<key>/."""
    tarball = offline_engine.bundle()
    folder = tarball.with_name(tarball.name.removesuffix(".tar.gz"))
    if (folder / "query-engine").exists():
        return folder
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=".unpack-") as tmp:
        unpacked = Path(tmp) / "bundle"
        with tarfile.open(tarball) as tar:
            tar.extractall(unpacked)
        with contextlib.suppress(OSError):  # another process got there first: theirs is whole
            os.rename(unpacked, folder)
    return folder


@dataclass(frozen=True)
class Timed:
    path: Path
    seconds: float


def litellm_venv(version: str) -> Timed:
    """LiteLLM `version` installed by install-litellm.sh with the offline engine, from the
    wheelhouse (as on a gateway host without an index); a second call is a stat. The path is
    the symlink install-litellm.sh switches to its finished build."""
    start = time.monotonic()
    wheelhouse = ensure_wheelhouse(version)
    venv = cache_dir() / "litellm" / f"venv-{version}"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f".lock-{version}", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run([str(INSTALL_SH), "--venv", str(venv), "--version", version,
                        "--wheelhouse", str(wheelhouse), "--engine", "offline",
                        "--prisma-offline", str(offline_bundle_dir())],
                       check=True, stdout=subprocess.PIPE, text=True)
    return Timed(venv, time.monotonic() - start)
