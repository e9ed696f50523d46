"""What the local node's images are made of, and their cache. Nothing can be pulled here and no
image builder is installed, so an image is this machine's own files (Debian 12, the node's
release) in one layer, described as localhosts/images/oci.py's Entries:

- a host file at its own path with each symlink on the way (Debian's merged /usr has
  /lib -> usr/lib), or at another path; a host folder whole (add_tree);
- the shared libraries `ldd` lists for what the image runs (add_libraries);
- python3.11 and its standard library (add_python);
- the users and folders every image has, and every parent folder (finish).

Cached under `$SPEAR_CACHE/images/<name>-<content key>/` (cached_image): the layer is built once
per key, and every set of names gets its archive from it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import re
import subprocess
import tarfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from components.cache import build_once, cache_dir
from localhosts.images import oci

Entries = oci.Entries
PYTHON = "/usr/bin/python3.11"
STDLIB = "/usr/lib/python3.11"
# Not needed to run a server: tests, GUIs, pip's bootstrap, the static library, packages.
STDLIB_LEFT_OUT = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3",
                   "config-3.11-x86_64-linux-gnu", "site-packages", "dist-packages"}
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
UID = GID = 1000  # the `spear` user every image has, to run as


@dataclass(frozen=True)
class Image:
    refs: tuple[str, ...]  # every name the archive gives the image
    archive: Path
    digest: str  # the manifest's, "sha256:..."

    @property
    def ref(self) -> str:
        return self.refs[0]

    @property
    def pinned(self) -> str:
        """The reference a stack pins: the tag and the digest."""
        return f"{self.ref}@{self.digest}"

    def write_ref(self, name: str) -> Path:
        """`$SPEAR_CACHE/images/<name>.ref`, the file a stack's `{file: ...}` image setting reads
        (the local stack's): this machine's build, whose digest no stack file can hold."""
        path = cache_dir() / "images" / f"{name}.ref"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.pinned + "\n")
        return path

    def config(self) -> dict:
        """What the archive says to run the image with (Env, Cmd, WorkingDir)."""
        with tarfile.open(self.archive) as tar:
            manifest = json.load(_blob(tar, self.digest))
            return json.load(_blob(tar, manifest["config"]["digest"]))["config"]

    def unpack(self, into: Path) -> None:
        """The image's one layer unpacked into `into`, as containerd's snapshotter would."""
        with tarfile.open(self.archive) as tar:
            manifest = json.load(_blob(tar, self.digest))
            with _blob(tar, manifest["layers"][0]["digest"]) as layer, \
                    tarfile.open(fileobj=layer, mode="r|gz") as files:
                files.extractall(into, filter="fully_trusted")  # our own: keep /tmp's 1777


def _blob(archive: tarfile.TarFile, digest: str):
    return archive.extractfile(f"blobs/sha256/{digest.removeprefix('sha256:')}")


# ---------------------------------------------------------------------------------------------
# What goes in


def _add_symlinks(path: str, entries: Entries) -> str:
    """Adds each symlink on the way to host path `path` (as Debian's merged /usr has /lib ->
    usr/lib); returns the real path they lead to."""
    current = "/"
    parts = Path(path).parts[1:]
    for i, part in enumerate(parts):
        candidate = os.path.join(current, part)
        if os.path.islink(candidate):
            target = os.readlink(candidate)
            entries[candidate] = ("symlink", target)
            resolved = os.path.normpath(os.path.join(current, target))
            return _add_symlinks(os.path.join(resolved, *parts[i + 1:]), entries)
        current = candidate
    return current


def host_binary(name: str) -> str:
    """A program this machine has (from Debian: scripts/setup.sh installs it) that an image takes."""
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(f"{name} is missing: scripts/setup.sh installs it")
    return found


def reported_version(binary: str) -> str:
    """The x.y.z a program's --version reports (Debian's `2.42.0+ds` is 2.42.0; nft's v1.0.6)."""
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True)
    match = re.search(r"(?:version |v)(\d+\.\d+\.\d+)", out.stdout + out.stderr)
    if match is None:
        raise RuntimeError(f"{binary} --version: no version in {out.stdout[:200]!r}")
    return match[1]


def program_with_python(binary: str, at: str, folders: Mapping[str, int] = {}) -> Entries:
    """An image's files: one program of this machine's at `at`, python3 and its standard library
    (for a script beside it), the shared libraries both need, and empty `folders` (path -> mode)."""
    entries: Entries = {}
    add_host_file(binary, entries, at=at)
    add_libraries([binary, *add_python(entries)], entries)
    entries.update({folder: ("dir", mode) for folder, mode in folders.items()})
    finish(entries)
    return entries


def add_host_file(path: str, entries: Entries, at: str | None = None) -> None:
    """The host file `path` at the same path in the image, with its symlinks, or at `at`."""
    real = os.path.realpath(path) if at else _add_symlinks(path, entries)
    entries[at or real] = ("file", real, os.stat(real).st_mode & 0o7777)


def shared_libraries(binary: str) -> list[str]:
    """What `ldd` says `binary` loads (the dynamic loader included), as host paths; none for a
    static executable (Codex's)."""
    done = subprocess.run(["ldd", binary], capture_output=True, text=True)
    if done.returncode != 0:
        if "not a dynamic executable" in done.stdout + done.stderr:
            return []
        raise RuntimeError(f"ldd {binary}: {(done.stdout + done.stderr).strip()}")
    out = done.stdout
    if "not found" in out:
        raise RuntimeError(f"ldd {binary}: a library is missing:\n{out}")
    return [word for line in out.splitlines() for word in line.split()
            if word.startswith("/")]


def add_libraries(binaries: Iterable[str], entries: Entries, own: Sequence[str] = ()) -> None:
    """Every shared library `ldd` lists for `binaries`, but those in the folders `own` (which the
    image holds as files of their own already)."""
    inside = tuple(f"{folder.rstrip('/')}/" for folder in own)
    libraries = {lib for binary in binaries for lib in shared_libraries(binary)
                 if not lib.startswith(inside)}
    for library in sorted(libraries):
        add_host_file(library, entries)


def _is_shared_object(path: str) -> bool:
    name = os.path.basename(path)
    if not (name.endswith(".so") or ".so." in name):
        return False
    with open(path, "rb") as handle:
        return handle.read(4) == b"\x7fELF"


def add_tree(folder: str, entries: Entries, at: str | None = None) -> list[str]:
    """The host folder `folder` whole, at its own path or at `at`: folders and files with their
    modes, symlinks as they are. Returns its ELF shared objects (host paths), for ldd."""
    at = at or folder
    shared = []
    for current, dirs, files in os.walk(folder):
        dirs.sort()
        image_dir = os.path.normpath(os.path.join(at, os.path.relpath(current, folder)))
        entries[image_dir] = ("dir", os.stat(current).st_mode & 0o7777)
        for name in sorted(files) + [d for d in dirs if os.path.islink(os.path.join(current, d))]:
            path = os.path.join(current, name)
            if os.path.islink(path):
                entries[f"{image_dir}/{name}"] = ("symlink", os.readlink(path))
            else:
                entries[f"{image_dir}/{name}"] = ("file", path, os.stat(path).st_mode & 0o7777)
                if _is_shared_object(path):
                    shared.append(path)
    return shared


def add_python(entries: Entries) -> list[str]:
    """python3.11 (also as python3) and its standard library; returns the interpreter and its
    extension modules, for ldd."""
    extensions = []
    for folder, dirs, files in os.walk(STDLIB):
        if folder == STDLIB:
            dirs[:] = [d for d in dirs if d not in STDLIB_LEFT_OUT]
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(folder, name)
            if os.path.islink(path):
                entries[path] = ("symlink", os.readlink(path))
                if os.path.isabs(os.readlink(path)):  # Debian's sitecustomize.py in /etc
                    add_host_file(os.path.realpath(path), entries)
            else:
                entries[path] = ("file", path, os.stat(path).st_mode & 0o7777)
                if name.endswith(".so"):
                    extensions.append(path)
    add_host_file(PYTHON, entries)
    entries["/usr/bin/python3"] = ("symlink", "python3.11")
    return [PYTHON, *extensions]


def finish(entries: Entries) -> None:
    """What every image has: root and the `spear` user, a sticky /tmp, /root; then every parent
    folder of what is in."""
    entries["/etc/passwd"] = ("data", ("root:x:0:0:root:/root:/bin/sh\n"
                                       f"spear:x:{UID}:{GID}:spear:/home/spear:/bin/sh\n"
                                       ).encode(), 0o644)
    entries["/etc/group"] = ("data", f"root:x:0:\nspear:x:{GID}:\n".encode(), 0o644)
    entries["/tmp"] = ("dir", 0o1777)
    entries["/root"] = ("dir", 0o700)
    for path in list(entries):
        for parent in Path(path).parents:
            if str(parent) != "/" and str(parent) not in entries:
                entries[str(parent)] = ("dir", 0o755)


# ---------------------------------------------------------------------------------------------
# The cache


def content_key(entries: Entries, *material: object, keyed: Mapping[str, str] | None = None,
                ) -> str:
    """A digest of `material` (a recipe version) and what goes in: each host file by its image
    path, mode, size and mtime, the rest by value. The image folders in `keyed` count by the key
    given (a build's own content key) instead of by what they hold, which then may gain files
    (bytecode an import writes) without a new key."""
    keyed = dict(sorted((keyed or {}).items()))
    inside = tuple(f"{folder}/" for folder in keyed)
    listed: list = [*material, *([folder, key] for folder, key in keyed.items())]
    for path, entry in sorted(entries.items()):
        if path in keyed or path.startswith(inside):
            continue
        if entry[0] == "file":
            st = os.stat(entry[1])
            listed.append([path, entry[2], st.st_size, st.st_mtime_ns])
        elif entry[0] == "data":
            listed.append([path, entry[2], hashlib.sha256(entry[1]).hexdigest()])
        else:
            listed.append([path, *entry])
    return hashlib.sha256(json.dumps(listed).encode()).hexdigest()[:16]


def cached_image(folder_name: str, refs: Sequence[str], archive_name: str,
                 layer_entries: Callable[[], Entries], config: Mapping[str, object],
                 history: str) -> Image:
    """The image named `refs` from `$SPEAR_CACHE/images/<folder_name>/` (the name ends with the
    content key): its layer written once from `layer_entries()`, its archive once per
    `archive_name` (one per set of refs)."""
    folder = cache_dir() / "images" / folder_name
    layer, meta_path = folder / "layer.tar.gz", folder / "layer.json"

    def build_layer() -> None:
        digest, diff_id, size = oci.write_layer(layer_entries(), layer)
        tmp = meta_path.with_name(meta_path.name + ".tmp")
        tmp.write_text(json.dumps({"digest": digest, "diff_id": diff_id, "size": size}))
        os.replace(tmp, meta_path)

    build_once(meta_path, build_layer, f"image {folder_name}: its layer")
    meta = json.loads(meta_path.read_text())
    archive, digest_path = folder / f"{archive_name}.tar", folder / f"{archive_name}.digest"

    def build_archive() -> None:
        tmp_archive, tmp_digest = (path.with_name(path.name + ".tmp")
                                   for path in (archive, digest_path))
        tmp_digest.write_text(oci.write_archive(layer, meta, refs, tmp_archive, config,
                                                history=history))
        os.replace(tmp_archive, archive)
        os.replace(tmp_digest, digest_path)

    build_once(digest_path, build_archive, f"image {folder_name}: its archive {archive_name}")
    return Image(tuple(refs), archive, digest_path.read_text())
