"""Nothing machine-local is tracked: a fresh clone on another machine must set itself up. A
`.venv` link committed into a CI folder once broke every clone but the one machine that had that
folder (`setup.sh` then failed with "File exists")."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path, PurePosixPath

REPO = Path(__file__).resolve().parents[2]

# Folders and endings that only ever hold what a machine made: virtualenvs, caches, build output.
LOCAL_PARTS = {".venv", "venv", "__pycache__", ".pytest_cache", ".cache", "node_modules",
               "build", "dist", ".mypy_cache", ".ruff_cache"}
LOCAL_ENDINGS = (".pyc", ".pyo", ".egg-info", ".so", ".o")


def machine_local(path: str, link_target: str | None) -> str | None:
    """Why a tracked `path` (with its target when git tracks it as a link) is machine-local, or
    None when it is not."""
    parts = PurePosixPath(path).parts
    for part in parts:
        if part in LOCAL_PARTS or part.endswith(LOCAL_ENDINGS):
            return f"{path}: {part!r} is made by a machine, not written by us"
    if link_target is not None:
        if link_target.startswith("/"):
            return f"{path}: a link to the absolute path {link_target}"
        inside = os.path.normpath(PurePosixPath(path).parent / link_target)
        if inside == ".." or inside.startswith("../"):
            return f"{path}: a link out of the repository ({link_target})"
    return None


def tracked(repo: Path) -> list[tuple[str, str | None]]:
    """Each tracked path, with its link target when git tracks it as a symlink (mode 120000)."""
    out = subprocess.run(["git", "ls-files", "-s", "-z"], cwd=repo, capture_output=True,
                         check=True).stdout.decode()
    files = []
    for entry in filter(None, out.split("\0")):
        meta, path = entry.split("\t", 1)
        mode, blob = meta.split()[:2]
        target = None
        if mode == "120000":
            target = subprocess.run(["git", "cat-file", "blob", blob], cwd=repo,
                                    capture_output=True, check=True).stdout.decode()
        files.append((path, target))
    return files


def test_git_tracks_no_virtualenv_cache_build_output_or_absolute_link():
    problems = [why for path, target in tracked(REPO) if (why := machine_local(path, target))]
    assert not problems, "\n".join(problems)


def test_the_check_names_each_kind_of_machine_local_file():
    assert machine_local(".venv", "/tmp/ci.zwFv/main/.venv")
    assert machine_local(".venv/bin/python", None)
    assert machine_local("spear/__pycache__/rules.cpython-312.pyc", None)
    assert machine_local("hosts/gateway/node_modules/x/index.js", None)
    assert machine_local("docs/link", "/etc/passwd")
    assert machine_local("docs/link", "../../outside")
    assert machine_local("spear/rules.py", None) is None
    assert machine_local("docs/link", "../README.md") is None


def test_gitignore_keeps_a_venv_out_whether_it_is_a_folder_or_a_link():
    for path in (".venv", ".venv/bin/python", "spear/__pycache__/x.pyc"):
        ignored = subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=REPO)
        assert ignored.returncode == 0, f".gitignore does not cover {path}"


def test_setup_replaces_a_dangling_venv_link_with_a_virtualenv(tmp_path):
    # setup.sh in a stand-in checkout with nothing to install, so only its virtualenv step acts
    # (the host tools it checks first are there once scripts/test has run it).
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "setup.sh", tmp_path / "scripts" / "setup.sh")
    (tmp_path / "requirements.txt").write_text("")
    (tmp_path / ".venv").symlink_to("/nonexistent/ci.zwFv/main/.venv")
    result = subprocess.run(["bash", "scripts/setup.sh", "--no-engine"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    venv = tmp_path / ".venv"
    assert not venv.is_symlink() and (venv / "bin" / "python").exists()
    assert "replacing the dangling link .venv" in result.stderr
