"""A copy of this working tree as a fresh clone of it would hold it: the files git tracks and the
new ones it does not ignore, nothing machine-local (no virtualenv, no cache)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def working_tree_copy(repo: Path, dest: Path) -> Path:
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=repo, capture_output=True, check=True).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = repo / name
        if source.is_file() and not source.is_symlink():  # not a file deleted in the working tree
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest
