"""A copy of this working tree as a fresh clone of it would hold it: the files git tracks and the
new ones it does not ignore, nothing machine-local (no virtualenv, no cache)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def clone_files(repo: Path) -> list[str]:
    """The paths (relative to `repo`) a fresh clone of this working tree would hold."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=repo, capture_output=True, check=True).stdout.decode()
    return list(filter(None, listed.split("\0")))


def working_tree_copy(repo: Path, dest: Path) -> Path:
    for name in clone_files(repo):
        source = repo / name
        if source.is_file() and not source.is_symlink():  # not a file deleted in the working tree
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest
