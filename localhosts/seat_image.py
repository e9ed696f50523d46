"""The agent seat's image for the local cluster (vllmFleet.agentSandbox.seatImage):
`localhost/spear-fleet/seat:<tag>`, the real harnesses at the versions the stack pins
(`harnesses`), installed by localhosts/harness_install.py, with what they run on and run: node
(this machine's, which the installs were made with), a shell, coreutils, grep, sed, find and git
for the commands an agent executes, and the shared libraries `ldd` lists for each, in one layer
(localhosts/image_files.py). The seat's Deployment (components/agent_seats) runs it as the image's
unprivileged user with a read-only root; its one writable mount is the workspace.

OpenHands is left out: its install is a Python 3.12 virtualenv of about 36 minutes' pip work on
this machine (docs/BENCHMARKS.md), which a cold CI run cannot afford.

Each harness's version is an image label (`org.spear-fleet.harness.<harness>`), and the tag is
derived from the versions, so a bump is a new image with a new digest. Cached under
`$SPEAR_CACHE/images/seat-<key>/`, keyed by each file's path, mode, size and mtime.

CLI: `python -m localhosts.seat_image [harness=version ...]` prints the archive, ref and digest.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from localhosts import harness_install, image_files
from localhosts.image_files import Entries, Image
from spear.harness import CLAUDE_CODE, CODEX, DEFAULT_VERSIONS, QWEN_CODE

REPOSITORY = "localhost/spear-fleet/seat"
HARNESSES = (QWEN_CODE, CLAUDE_CODE, CODEX)  # the Node ones; OpenHands: see above
HARNESS_ROOT = "/opt/harnesses"
BIN = "/usr/local/bin"
WORKSPACE = "/workspace"
# What an agent's commands need beside the harness (all from Debian's packages on this machine).
TOOLS = ("sh", "bash", "env", "cat", "ls", "mkdir", "rm", "cp", "mv", "ln", "touch", "chmod",
         "head", "tail", "wc", "sort", "uniq", "tr", "cut", "date", "dirname", "basename", "pwd",
         "echo", "true", "false", "test", "printf", "tee", "id", "uname", "sleep", "readlink",
         "mktemp", "diff", "grep", "sed", "find", "xargs", "git")
LABEL = "org.spear-fleet.harness."
RECIPE_VERSION = 2  # bump when the recipe changes, so cached layers are rebuilt


def tag(versions: Mapping[str, str]) -> str:
    """The versions, short: one tag per set of harness versions."""
    text = json.dumps({h: versions[h] for h in HARNESSES}, sort_keys=True)
    return "h-" + hashlib.sha256(text.encode()).hexdigest()[:12]


def _executables(folder: Path) -> list[str]:
    found = []
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink() and path.stat().st_mode & 0o111:
            with open(path, "rb") as handle:
                if handle.read(4) == b"\x7fELF":
                    found.append(str(path))
    return found


def image_entries(commands: Mapping[str, Path]) -> Entries:
    """`commands`: harness -> its installed command (in its install folder's node_modules)."""
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
    for harness, command in commands.items():
        folder = command.parents[2]  # <install>/node_modules/.bin/<command>
        at = f"{HARNESS_ROOT}/{harness}"
        binaries += image_files.add_tree(str(folder), entries, at=at) + _executables(folder)
        entries[f"{BIN}/{command.name}"] = (
            "symlink", f"{at}/{command.relative_to(folder)}")
    image_files.add_libraries(binaries, entries)
    entries[WORKSPACE] = ("dir", 0o755)  # an emptyDir is mounted over it
    image_files.finish(entries)
    return entries


def ensure_image(versions: Mapping[str, str] = DEFAULT_VERSIONS) -> Image:
    commands = {h: harness_install.install(h, versions[h]) for h in HARNESSES}
    entries = image_entries(commands)
    key = image_files.content_key(entries, RECIPE_VERSION)
    name = tag(versions)
    return image_files.cached_image(
        f"seat-{key}", (f"{REPOSITORY}:{name}",), name, lambda: entries,
        {"Env": [image_files.PATH_ENV, f"HOME={WORKSPACE}/.home"],
         "Entrypoint": ["sleep", "infinity"], "WorkingDir": WORKSPACE,
         "User": str(image_files.UID),
         "Labels": {LABEL + h: versions[h] for h in HARNESSES}},
        history=f"localhosts/seat_image.py r{RECIPE_VERSION}")


def pinned_ref(image: Image) -> str:
    """The reference a seat runs: the tag and the digest (seatImage must carry the digest)."""
    return f"{image.ref}@{image.digest}"


if __name__ == "__main__":
    given = dict(arg.split("=", 1) for arg in sys.argv[1:])
    image = ensure_image({**DEFAULT_VERSIONS, **given})
    print(json.dumps({"archive": str(image.archive), "refs": image.refs, "digest": image.digest,
                      "pinned": pinned_ref(image)}, indent=2))
