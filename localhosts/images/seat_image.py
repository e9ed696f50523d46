"""The agent seat's image for the local cluster (vllmFleet.agentSandbox.seatImage):
`localhost/spear-fleet/seat:<tag>`, the four real harnesses at the versions the stack pins
(`harnesses`), installed by localhosts/images/harness_install.py, with what they run on and run: node
(this machine's, which the installs were made with) for Qwen-Code, Claude Code and Codex;
OpenHands' virtualenv and the Python 3.12 it was made with (moved to PYTHON_ROOT: the image's
/root, where pyenv keeps it here, is closed to the image's user); a shell, coreutils, grep, sed,
find and git for the commands an agent executes; and the shared libraries `ldd` lists for each,
in one layer (localhosts/images/image_files.py). The seat's Deployment (components/agent_seats) runs it as the
image's unprivileged user with a read-only root; its one writable mount is the workspace.

Each harness's version is an image label (`org.spear-fleet.harness.<harness>`), and the tag is
derived from the versions (spear/harness.py::seat_image_tag), so a bump is a new image with a new
digest, and a stack whose `harnesses` moved past its image's tag is refused at preview. Cached under
`$SPEAR_CACHE/images/seat-<key>/`, keyed by each file's path, mode, size and mtime.

CLI: `python -m localhosts.images.seat_image [harness=version ...]` prints the archive, ref and digest.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from localhosts.images import harness_install, image_files
from localhosts.images.image_files import Entries, Image
from spear.harness import DEFAULT_VERSIONS, HARNESSES, OPENHANDS, seat_image_tag

REPOSITORY = "localhost/spear-fleet/seat"
REF_NAME = "local-seat"  # the local stack's seatImage.file: $SPEAR_CACHE/images/local-seat.ref
HARNESS_ROOT = "/opt/harnesses"
PYTHON = "python3.12"  # OpenHands' own requirement (localhosts/images/harness_install.py)
PYTHON_ROOT = f"/opt/{PYTHON}"
# Not needed to run OpenHands: the standard library's tests, GUIs, build files, the base's own
# packages (the virtualenv has its own).
PYTHON_LEFT_OUT = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "site-packages",
                   "config-3.12-x86_64-linux-gnu"}
BIN = "/usr/local/bin"
WORKSPACE = "/workspace"
# What an agent's commands need beside the harness (all from Debian's packages on this machine).
TOOLS = ("sh", "bash", "env", "cat", "ls", "mkdir", "rm", "cp", "mv", "ln", "touch", "chmod",
         "head", "tail", "wc", "sort", "uniq", "tr", "cut", "date", "dirname", "basename", "pwd",
         "echo", "true", "false", "test", "printf", "tee", "id", "uname", "sleep", "readlink",
         "mktemp", "diff", "grep", "sed", "find", "xargs", "git",
         # uv's relocatable scripts (OpenHands') find their interpreter with these.
         "realpath")
LABEL = "org.spear-fleet.harness."
RECIPE_VERSION = 3  # bump when the recipe changes, so cached layers are rebuilt


def _executables(folder: Path) -> list[str]:
    found = []
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink() and path.stat().st_mode & 0o111:
            with open(path, "rb") as handle:
                if handle.read(4) == b"\x7fELF":
                    found.append(str(path))
    return found


def _add_openhands(command: Path, entries: Entries) -> tuple[list[str], list[str]]:
    """OpenHands' virtualenv at HARNESS_ROOT/openhands/venv on the Python it was made with, moved
    to PYTHON_ROOT. Returns the ELF files for ldd and the host folders they came from (which
    `ldd` may name for a library the image holds already)."""
    venv = command.parents[1]  # <install>/venv/bin/openhands
    settings = (venv / "pyvenv.cfg").read_text()
    home = next(line.split("=", 1)[1].strip() for line in settings.splitlines()
                if line.startswith("home"))
    base = Path(home).parent
    stdlib = base / "lib" / PYTHON
    at = f"{HARNESS_ROOT}/{OPENHANDS}/venv"
    elf = image_files.add_tree(str(venv), entries, at=at)
    # The virtualenv's interpreter links and its base, moved with the base.
    for name in ("python", "python3", PYTHON):
        entries[f"{at}/bin/{name}"] = ("symlink", f"{PYTHON_ROOT}/bin/{PYTHON}")
    entries[f"{at}/pyvenv.cfg"] = ("data", settings.replace(home, f"{PYTHON_ROOT}/bin").encode(),
                                   0o644)
    image_files.add_host_file(str(base / "bin" / PYTHON), entries, at=f"{PYTHON_ROOT}/bin/{PYTHON}")
    for child in sorted(stdlib.iterdir()):
        if child.name in PYTHON_LEFT_OUT:
            continue
        target = f"{PYTHON_ROOT}/lib/{PYTHON}/{child.name}"
        if child.is_dir() and not child.is_symlink():
            elf += image_files.add_tree(str(child), entries, at=target)
        else:
            image_files.add_host_file(str(child), entries, at=target)
    # The interpreter's RUNPATH is the base's lib under /root, which the image's user cannot
    # open: the loader then finds libpython in /usr/lib, one of its own folders.
    libpython = next((base / "lib").glob(f"lib{PYTHON}.so.*"))
    image_files.add_host_file(str(libpython), entries, at=f"/usr/lib/{libpython.name}")
    entries[f"{BIN}/{command.name}"] = ("symlink", f"{at}/bin/{command.name}")
    return [str(base / "bin" / PYTHON), *elf], [str(venv), str(base)]


def image_entries(commands: Mapping[str, Path]) -> Entries:
    """`commands`: harness -> its installed command (in its install folder's node_modules, or
    OpenHands' virtualenv)."""
    entries: Entries = {}
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("node is missing: the Node harnesses run on it")
    image_files.add_host_file(node, entries)
    binaries = [node]
    for tool in TOOLS:
        found = shutil.which(tool)
        if found is None:
            raise RuntimeError(f"{tool} is missing on this machine: the seat image takes it from here")
        image_files.add_host_file(found, entries)
        binaries.append(str(Path(found).resolve()))
    # Scripts start with #!/bin/sh (uv's relocatable ones, OpenHands' entry points, among them):
    # Debian's merged /usr has /bin -> usr/bin, which PATH's /usr/bin/sh does not bring.
    image_files.add_host_file("/bin/sh", entries)
    own: list[str] = []
    for harness, command in commands.items():
        if harness == OPENHANDS:
            found, folders = _add_openhands(command, entries)
            binaries += found
            own += folders
            continue
        folder = command.parents[2]  # <install>/node_modules/.bin/<command>
        at = f"{HARNESS_ROOT}/{harness}"
        binaries += image_files.add_tree(str(folder), entries, at=at) + _executables(folder)
        entries[f"{BIN}/{command.name}"] = (
            "symlink", f"{at}/{command.relative_to(folder)}")
    image_files.add_libraries(binaries, entries, own=own)
    entries[WORKSPACE] = ("dir", 0o755)  # an emptyDir is mounted over it
    image_files.finish(entries)
    return entries


def ensure_image(versions: Mapping[str, str] = DEFAULT_VERSIONS) -> Image:
    commands = {h: harness_install.install(h, versions[h]) for h in HARNESSES}
    entries = image_entries(commands)
    key = image_files.content_key(entries, RECIPE_VERSION)
    name = seat_image_tag(versions)
    return image_files.cached_image(
        f"seat-{key}", (f"{REPOSITORY}:{name}",), name, lambda: entries,
        {"Env": [image_files.PATH_ENV, f"HOME={WORKSPACE}/.home"],
         "Entrypoint": ["sleep", "infinity"], "WorkingDir": WORKSPACE,
         "User": str(image_files.UID),
         "Labels": {LABEL + h: versions[h] for h in HARNESSES}},
        history=f"localhosts/images/seat_image.py r{RECIPE_VERSION}")


if __name__ == "__main__":
    given = dict(arg.split("=", 1) for arg in sys.argv[1:])
    image = ensure_image({**DEFAULT_VERSIONS, **given})
    print(json.dumps({"archive": str(image.archive), "refs": image.refs, "digest": image.digest,
                      "pinned": image.pinned}, indent=2))
