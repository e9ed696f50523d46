"""A wheelhouse for gateway hosts that cannot reach a package index (the local containers, an
air-gapped gateway): `pip download` of litellm[proxy]==<version> and hosts/gateway/requirements.txt
into one folder under $SPEAR_CACHE/wheelhouse, mounted into the local gateway host.

One folder for every version, so a stack can move between versions (an upgrade, a rollback)
without a new mount: pip picks the pinned files from it. A stamp per requirement set (its
digest) says that set is complete; a second call is a stat.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path

from components.cache import build_once, cache_dir
from components.gateway.install import REQUIREMENTS
from localhosts.report import log


def wheelhouse_dir() -> Path:
    return cache_dir() / "wheelhouse"


def ensure_wheelhouse(litellm_version: str) -> Path:
    """The folder, with every wheel litellm[proxy]==version and the gateway's pins need."""
    folder = wheelhouse_dir()
    requirements = REQUIREMENTS.read_text()
    key = hashlib.sha256(f"{litellm_version}\n{requirements}".encode()).hexdigest()[:16]
    stamp = folder / f".complete-{key}"
    build_once(stamp, lambda: _download(folder, litellm_version, requirements, stamp),
               f"the gateway's LiteLLM {litellm_version} wheelhouse")
    return folder


def _download(folder: Path, litellm_version: str, requirements: str, stamp: Path) -> None:
    log(f"downloading litellm[proxy]=={litellm_version} and its requirements into {folder}")
    # The hosts run Debian bookworm's CPython 3.11 on x86_64: wheels for exactly that.
    subprocess.run([sys.executable, "-m", "pip", "download", "-q",
                    "--disable-pip-version-check", "--dest", str(folder),
                    "--only-binary=:all:", "--python-version", "3.11",
                    "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_28_x86_64",
                    "--platform", "manylinux_2_17_x86_64", "--platform", "linux_x86_64",
                    "--implementation", "cp", "--abi", "cp311",
                    f"litellm[proxy]=={litellm_version}", "-r", str(REQUIREMENTS)],
                   check=True, stdout=sys.stderr)
    with tempfile.NamedTemporaryFile("w", dir=folder, delete=False) as partial:
        partial.write(requirements)
    Path(partial.name).rename(stamp)  # atomic: a stamp that exists is complete
