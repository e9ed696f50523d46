"""The agent seat's image for real, without a cluster: its one layer unpacked, its root mounted
read-only with a writable /workspace over it and /proc and /dev as a container has them, and each
of the four harnesses started in it with chroot as the image's user 1000, in the seat's
environment (spear/harness.py's wiring): each says the version the stack pins, and every package
of its tree is the one its committed lockfile holds. A harness that needs a file the image lacks,
a path its user cannot open or a writable root fails here. Their
turns through the gateway run in seat pods (tests/integration/test_gateway_in_cluster.py)."""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from localhosts.images import seat_image
from localhosts.images.harness_install import lock_files
from localhosts.images.image_files import PATH_ENV, UID
from spear import harness

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("seat-image") / "rootfs"
    root.mkdir()
    seat_image.ensure_image().unpack(root)
    for mountpoint in ("proc", "dev"):
        (root / mountpoint).mkdir()
    return root


def in_seat(root: Path, workspace: Path, name: str, argv: list[str]) -> subprocess.CompletedProcess:
    """argv run as a seat runs its harness: user 1000 in /workspace, the root read-only, the
    harness's wiring (a key that is not one, a gateway nobody listens at) in a clean environment.
    The mounts are the process's own and go with it."""
    env = harness.wiring("http://127.0.0.1:9", "sk-not-a-key", "coder", harness.DEFAULT_VERSIONS,
                         None)[name]["env"]
    script = ('mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" &&'
              ' mount --bind "$0" "$1/workspace" && mount -t proc proc "$1/proc" &&'
              ' mount --rbind /dev "$1/dev" && shift && exec env -i "$@"')
    return subprocess.run(
        ["unshare", "--mount", "sh", "-c", script, str(workspace), str(root), PATH_ENV,
         "HOME=/workspace/.home", "TMPDIR=/workspace/.tmp",
         *(f"{k}={v}" for k, v in env.items()),
         "/usr/sbin/chroot", f"--userspec={UID}:{UID}", str(root),
         "sh", "-c", 'mkdir -p "$HOME" "$TMPDIR" && cd /workspace && exec "$@"', "seat", *argv],
        capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("name", harness.HARNESSES)
def test_each_harness_in_the_seat_image_runs_as_user_1000_on_a_read_only_root_at_its_pin(
        root, tmp_path, name):
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    workspace.chmod(0o777)
    program = harness.ONE_TURN[name][0]
    done = in_seat(root, workspace, name, [program, "--version"])
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    assert harness.DEFAULT_VERSIONS[name] in done.stdout, done.stdout[-2000:]
    # The root is read-only, as the seat's: whatever the harness wrote went to the workspace.
    probe = in_seat(root, workspace, name, ["touch", "/opt/probe"])
    assert probe.returncode != 0 and "Read-only file system" in probe.stderr, probe.stderr


# One npm package's folder in a harness's tree: node_modules/[@scope/]name, nested as deep as npm
# nests them, as its lock's `packages` keys name them.
NPM_PACKAGE = re.compile(r"node_modules/(@[^/]+/)?[^/@][^/]*(/node_modules/(@[^/]+/)?[^/@][^/]*)*")


def pypi_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.mark.parametrize("name", harness.HARNESSES)
def test_every_package_of_each_harness_in_the_image_is_the_one_its_committed_lock_holds(root, name):
    registry = harness.PACKAGES[name][0]
    manifest, lock = (lock_files(name, harness.DEFAULT_VERSIONS[name])[f]
                      for f in harness.LOCK_FILES[registry])
    if registry == "npm":
        tree = root / seat_image.HARNESS_ROOT.lstrip("/") / name
        installed = {}
        for found in tree.glob("node_modules/**/package.json"):
            where = found.parent.relative_to(tree).as_posix()
            if NPM_PACKAGE.fullmatch(where):
                installed[where] = json.loads(found.read_text())["version"]
        locked = {k: v for k, v in json.loads(lock)["packages"].items() if k}
        assert {k: locked.get(k, {}).get("version") for k in installed} == installed
        required = {k for k, v in locked.items() if not v.get("optional") and not v.get("dev")}
        assert required <= set(installed), required - set(installed)
    else:
        venv = root / seat_image.HARNESS_ROOT.lstrip("/") / name / "venv"
        installed = {}
        for found in venv.glob("lib/python3.12/site-packages/*.dist-info/METADATA"):
            fields = dict(line.split(": ", 1) for line in found.read_text(errors="replace")
                          .split("\n\n", 1)[0].splitlines() if ": " in line)
            installed[pypi_name(fields["Name"])] = fields["Version"]
        locked: dict[str, set[str]] = {}
        for entry in tomllib.loads(lock.decode())["package"]:
            locked.setdefault(pypi_name(entry["name"]), set()).add(entry["version"])
        assert {n: v for n, v in installed.items() if v not in locked.get(n, ())} == {}
        assert installed[harness.PACKAGES[name][1]] == harness.DEFAULT_VERSIONS[name]
        assert len(installed) > 100  # OpenHands' whole tree, not its package alone
