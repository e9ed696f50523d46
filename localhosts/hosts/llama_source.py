"""llama.cpp source archive, taken from PyPI.

The sdist of llama-cpp-python vendors a complete llama.cpp tree (including `tools/server`) at
`vendor/llama.cpp`, so PyPI, which the dev host can reach, is our llama.cpp source. The archive is
downloaded once into `$SPEAR_CACHE/sources/` and checked against a pinned sha256, so the build key
that the project derives from it is stable.

CLI: `python -m localhosts.hosts.llama_source` prints `{"path": ..., "sha256": ..., "subdir": ...}`.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from components.cache import cache_dir

PACKAGE = "llama-cpp-python"
VERSION = "0.3.36"
ARCHIVE_NAME = f"llama_cpp_python-{VERSION}.tar.gz"
# sha256 of ARCHIVE_NAME as published on PyPI; a different file means a tampered or truncated
# download, never a legitimate update (PyPI never replaces a released file).
ARCHIVE_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
# Where llama.cpp's top-level CMakeLists.txt lives inside the archive.
SUBDIR = f"llama_cpp_python-{VERSION}/vendor/llama.cpp"


@dataclass(frozen=True)
class SourceArchive:
    path: Path
    sha256: str
    subdir: str

    def to_json(self) -> dict[str, str]:
        return {"path": str(self.path), "sha256": self.sha256, "subdir": self.subdir}



def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _download(dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    # Download into a scratch folder next to dest and rename, so an interrupted download never
    # leaves a partial archive where the next run would take it for a finished one. pip's
    # progress goes to stderr so that the CLI's stdout stays pure JSON.
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".download-") as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
             f"{PACKAGE}=={VERSION}", "-d", tmp],
            check=True,
            stdout=sys.stderr,
        )
        os.replace(Path(tmp) / ARCHIVE_NAME, dest)


def ensure_source_archive() -> SourceArchive:
    """Return the llama.cpp source archive, downloading it into the cache on first use."""
    path = cache_dir() / "sources" / ARCHIVE_NAME
    if not path.exists():
        _download(path)
    sha256 = file_sha256(path)
    if sha256 != ARCHIVE_SHA256:
        raise RuntimeError(
            f"{path} has sha256 {sha256}, expected {ARCHIVE_SHA256}; delete it to download again"
        )
    return SourceArchive(path=path, sha256=sha256, subdir=SUBDIR)


def read_member(archive: SourceArchive, relpath: str) -> bytes:
    """Return the bytes of `relpath` (relative to the llama.cpp tree) from the archive."""
    name = f"{archive.subdir}/{relpath}"
    with tarfile.open(archive.path) as tar:
        member = tar.extractfile(name)
        if member is None:
            raise FileNotFoundError(f"{name} is not a regular file in {archive.path}")
        return member.read()


if __name__ == "__main__":
    print(json.dumps(ensure_source_archive().to_json(), indent=2))
