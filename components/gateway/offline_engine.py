"""The offline query engine's bundle: hosts/gateway/prisma-offline with its node_modules,
installed here from npm (`npm ci --ignore-scripts`: nothing from Prisma's binary host) and
shipped to the gateway host, which needs no registry.

Content-keyed under $SPEAR_CACHE/prisma-offline/<key>.tar.gz: the key is a digest of the
package files and the engine's sources, so it is known at preview and a change re-installs.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

from components.cache import build_once, cache_dir
from components.gateway.render import HOSTS_DIR

SOURCE = HOSTS_DIR / "prisma-offline"
# Built here / not shipped / read by people only (a README edit must not reinstall LiteLLM).
_SKIP = {"node_modules", "test", "README.md"}


def _files() -> list[Path]:
    return sorted(path for path in SOURCE.rglob("*")
                  if path.is_file() and not _SKIP & set(path.relative_to(SOURCE).parts))


def bundle_key() -> str:
    digest = hashlib.sha256()
    for path in _files():
        digest.update(str(path.relative_to(SOURCE)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def bundle() -> Path:
    """The bundle's tarball, built once per key (npm ci, about 5 s warm)."""
    folder = cache_dir() / "prisma-offline"
    tarball = folder / f"{bundle_key()}.tar.gz"
    # Silent: the gateway's install builds it inside the Pulumi program (about 5 s).
    build_once(tarball, lambda: _build(tarball), None)
    return tarball


def _build(tarball: Path) -> None:
    with tempfile.TemporaryDirectory(dir=tarball.parent, prefix=".build-") as tmp:
        work = Path(tmp) / "prisma-offline"
        for path in _files():
            target = work / path.relative_to(SOURCE)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
        subprocess.run(["npm", "ci", "--ignore-scripts", "--omit=dev", "--no-audit",
                        "--no-fund", "--loglevel=error"], cwd=work, check=True,
                       stdout=subprocess.DEVNULL)
        partial = tarball.with_name(tarball.name + ".partial")
        subprocess.run(["tar", "-czf", str(partial), "-C", str(work), "."], check=True)
        partial.rename(tarball)  # atomic: a tarball that exists is complete
