"""The real coding harnesses at the versions a stack pins (`harnesses`), installed on this machine
for the tests and checks that run them, each from its committed lockfile (spear/harness.py::LOCKS),
so every dependency is the one locked, not the newest its ranges allow: the Node ones with
npm into a prefix, OpenHands with uv into a relocatable Python 3.12 virtualenv (its own
requirement) with its bytecode compiled, so the seat image (localhosts/images/seat_image.py) can
hold it at another path on a read-only root. uv and not pip: pip took 36 minutes for OpenHands
here, uv under a minute (docs/BENCHMARKS.md). Each is cached by content under
$SPEAR_CACHE/harnesses/<harness>-<key>: the key is the harness, its version, its lockfile and the
runtime that runs it, so a bump, a new lock or a new Node installs afresh and anything else
reuses what is there.

`write_lock` makes a version's lockfile (`scripts/harness-lock <harness> <version>`): npm resolves
the package's tree without installing it (no install script runs); uv locks OpenHands for Linux,
where seats run.

    python -m localhosts.images.harness_install codex 0.169.0    # prints the harness's command
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from components.cache import build_once, cache_dir
from spear.harness import (EXACT_VERSION, EXACT_VERSION_TEXT, HARNESSES, LOCK_FILES, PACKAGES,
                           lock_folder, lock_problem)

# Each harness's command, inside its folder.
COMMANDS = {"qwen-code": "node_modules/.bin/qwen", "claude-code": "node_modules/.bin/claude",
            "codex": "node_modules/.bin/codex", "openhands": "venv/bin/openhands"}
PROJECT = Path(__file__).resolve().parents[2]  # where the lockfiles are committed
PYTHON_312 = ("python3.12", "/root/.pyenv/versions/3.12.1/bin/python")  # PATH's first
# How the OpenHands virtualenv is made (above): a change makes a new one.
VENV_RECIPE = "uv relocatable, bytecode compiled"


class InstallError(RuntimeError):
    """A harness that cannot be installed here, said in one line."""


def runtime(harness: str) -> list[str]:
    """The interpreter that installs and runs the harness: node, or a Python 3.12."""
    if PACKAGES[harness][0] == "npm":
        found = shutil.which("node")
        if not found:
            raise InstallError(f"{harness} needs node on PATH (npm installs it)")
        return [found]
    for candidate in PYTHON_312:
        found = shutil.which(candidate)
        # A pyenv shim is on PATH for every version pyenv has, and fails unless it is selected.
        if found and subprocess.run([found, "-c", "import sys; assert sys.version_info[:2] =="
                                     " (3, 12)"], capture_output=True).returncode == 0:
            return [found]
    raise InstallError(f"{harness} needs Python 3.12: none of {', '.join(PYTHON_312)} runs here")


def uv() -> str:
    """The uv of this project's virtualenv (requirements.txt), else PATH's."""
    beside = Path(sys.executable).with_name("uv")
    found = str(beside) if beside.exists() else shutil.which("uv")
    if not found:
        raise InstallError("openhands is installed with uv: pip install uv (requirements.txt)")
    return found


def lock_files(harness: str, version: str) -> dict[str, bytes | None]:
    """The committed lock folder's files by name (None: missing)."""
    folder = PROJECT / lock_folder(harness, version)
    return {name: (folder / name).read_bytes() if (folder / name).is_file() else None
            for name in LOCK_FILES[PACKAGES[harness][0]]}


def locked(harness: str, version: str) -> dict[str, bytes]:
    """The version's committed lockfile, or an InstallError saying how to write it."""
    files = lock_files(harness, version)
    problem = lock_problem(harness, version, files)
    if problem:
        raise InstallError(f"{harness} {version}: its lockfile in {lock_folder(harness, version)}/"
                           f" does not stand ({problem}): scripts/harness-lock {harness} {version}")
    return {name: content for name, content in files.items() if content is not None}


def install_key(harness: str, version: str, interpreter: list[str], lock: dict[str, bytes]) -> str:
    made_by = subprocess.run([*interpreter, "--version"], capture_output=True, text=True,
                             check=True).stdout.strip()
    recipe = [] if PACKAGES[harness][0] == "npm" else [VENV_RECIPE]
    locks = {name: hashlib.sha256(content).hexdigest() for name, content in sorted(lock.items())}
    text = json.dumps([harness, version, PACKAGES[harness], made_by, locks, *recipe])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def install(harness: str, version: str) -> Path:
    """The harness's command at `version`, installed from its lockfile first unless the cache
    holds it."""
    interpreter, lock = runtime(harness), locked(harness, version)
    folder = cache_dir() / "harnesses" / f"{harness}-{install_key(harness, version, interpreter, lock)}"

    def build() -> None:
        shutil.rmtree(folder, ignore_errors=True)  # a run that died half way
        # npm reads the lock beside its prefix's manifest; uv exports from a project of its own.
        npm = PACKAGES[harness][0] == "npm"
        project = folder if npm else folder / "lock"
        project.mkdir(parents=True)
        for name, content in lock.items():
            (project / name).write_bytes(content)
        if npm:
            # Not `npm ci`: it refuses a lock without every platform's optional package, and
            # the registry here serves only some (Qwen-Code's clipboard builds). `npm install`
            # installs what the lock holds, at its versions and integrity hashes, and skips
            # the optional ones it cannot get; the seat image's test compares the tree.
            subprocess.run(["npm", "install", "--prefix", str(folder), "--no-save", "--no-audit",
                            "--no-fund"], check=True)
        else:
            venv, tool, requirements = folder / "venv", uv(), folder / "requirements.txt"
            # The lock's Linux packages for this Python, with their hashes, and nothing else.
            subprocess.run([tool, "export", "-q", "--frozen", "--no-emit-project", "--format",
                            "requirements-txt", "--project", str(project), "--python",
                            interpreter[0], "-o", str(requirements)], check=True)
            subprocess.run([tool, "venv", "-q", "--relocatable", "--python", interpreter[0],
                            str(venv)], check=True)
            subprocess.run([tool, "pip", "sync", "-q", "--compile-bytecode", "--require-hashes",
                            "--python", str(venv / "bin/python"), str(requirements)], check=True)
        done.touch()

    # Beside the folder, so a half-made folder can go while the lock (in their parent) is held.
    done = folder.with_name(folder.name + ".complete")
    build_once(done, build, f"harness install {folder.name}")
    return folder / COMMANDS[harness]


def write_lock(harness: str, version: str) -> Path:
    """Resolves the version's dependency tree; writes its lockfile into the project, to commit."""
    registry, package = PACKAGES[harness]
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        if registry == "npm":
            (work / "package.json").write_text(json.dumps(
                {"name": f"spear-fleet-seat-{harness}", "private": True,
                 "dependencies": {package: version}}, indent=2) + "\n")
            subprocess.run(["npm", "install", "--package-lock-only", "--ignore-scripts",
                            "--no-audit", "--no-fund"], cwd=work, check=True)
        else:
            (work / "pyproject.toml").write_text(
                f'[project]\nname = "spear-fleet-seat-{harness}"\nversion = "0"\n'
                f'requires-python = "==3.12.*"\ndependencies = ["{package}=={version}"]\n\n'
                "[tool.uv]\n# Seats are Linux containers.\n"
                "environments = [\"sys_platform == 'linux'\"]\n")
            subprocess.run([uv(), "lock", "-q", "--python", runtime(harness)[0]], cwd=work,
                           check=True)
        files = {name: (work / name).read_bytes() for name in LOCK_FILES[registry]}
    problem = lock_problem(harness, version, files)
    if problem:
        raise InstallError(f"{harness} {version}: the lock written does not stand ({problem})")
    folder = PROJECT / lock_folder(harness, version)
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        (folder / name).write_bytes(content)
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m localhosts.images.harness_install",
        description="Install a harness from its lockfile and print its command, or (--lock)"
                    " write the lockfile of a version.")
    parser.add_argument("--lock", action="store_true", help="write the version's lockfile")
    parser.add_argument("harness", choices=HARNESSES)
    parser.add_argument("version")
    args = parser.parse_args(argv)
    if not EXACT_VERSION.fullmatch(args.version):
        parser.error(f"version {args.version!r}: {EXACT_VERSION_TEXT}")
    try:
        if args.lock:
            print(f"wrote {write_lock(args.harness, args.version).relative_to(PROJECT)}/: commit it")
        else:
            print(install(args.harness, args.version))
    except (InstallError, subprocess.CalledProcessError) as error:
        print(f"harness_install: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
