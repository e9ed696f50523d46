"""The real coding harnesses at the versions a stack pins (`harnesses`), installed on this machine
for the tests and checks that run them: the Node ones with npm into a prefix, OpenHands with uv
into a relocatable Python 3.12 virtualenv (its own requirement) with its bytecode compiled, so
the seat image (localhosts/images/seat_image.py) can hold it at another path on a read-only root. uv
and not pip: pip took 36 minutes for OpenHands here, uv under a minute (docs/BENCHMARKS.md). Each
is cached by content under
$SPEAR_CACHE/harnesses/<harness>-<key>: the key is the harness, its version and the runtime that
runs it, so a bump or a new Node installs afresh and anything else reuses what is there.

    python -m localhosts.images.harness_install codex 0.169.0    # prints the harness's command
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

from components.cache import build_once, cache_dir
from spear.harness import PACKAGES

# Each harness's command, inside its folder.
COMMANDS = {"qwen-code": "node_modules/.bin/qwen", "claude-code": "node_modules/.bin/claude",
            "codex": "node_modules/.bin/codex", "openhands": "venv/bin/openhands"}
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


def install_key(harness: str, version: str, interpreter: list[str]) -> str:
    made_by = subprocess.run([*interpreter, "--version"], capture_output=True, text=True,
                             check=True).stdout.strip()
    recipe = [] if PACKAGES[harness][0] == "npm" else [VENV_RECIPE]
    text = json.dumps([harness, version, PACKAGES[harness], made_by, *recipe])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def install(harness: str, version: str) -> Path:
    """The harness's command at `version`, installed first unless the cache holds it."""
    interpreter = runtime(harness)
    folder = cache_dir() / "harnesses" / f"{harness}-{install_key(harness, version, interpreter)}"
    registry, package = PACKAGES[harness]

    def build() -> None:
        shutil.rmtree(folder, ignore_errors=True)  # a run that died half way
        folder.mkdir(parents=True)
        if registry == "npm":
            subprocess.run(["npm", "install", "--prefix", str(folder), "--no-audit", "--no-fund",
                            f"{package}@{version}"], check=True)
        else:
            venv, tool = folder / "venv", uv()
            subprocess.run([tool, "venv", "-q", "--relocatable", "--python", interpreter[0],
                            str(venv)], check=True)
            subprocess.run([tool, "pip", "install", "-q", "--compile-bytecode", "--python",
                            str(venv / "bin/python"), f"{package}=={version}"], check=True)
        done.touch()

    # Beside the folder, so a half-made folder can go while the lock (in their parent) is held.
    done = folder.with_name(folder.name + ".complete")
    build_once(done, build, f"harness install {folder.name}")
    return folder / COMMANDS[harness]


if __name__ == "__main__":
    print(install(sys.argv[1], sys.argv[2]))
