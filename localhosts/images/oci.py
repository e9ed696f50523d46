"""One-layer OCI image archives, written with the standard library (nothing can be pulled here,
and no image builder is installed): what `ctr images import` loads for the local node.

A layer is described by Entries: image path -> ("file", host path, mode) | ("symlink", target) |
("dir", mode) | ("data", bytes, mode). It is streamed through gzip (level 1: level 9 cost minutes
for a few percent) while both digests are taken; entries are sorted and what the writer makes
itself has mtime 0, so the same files make the same digests. The archive is an OCI image layout
tar, one index entry per name (the `io.containerd.image.name` annotation).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

Entries = dict[str, tuple]
GZIP_LEVEL = 1
EPOCH = 0
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
INDEX_TYPE = "application/vnd.oci.image.index.v1+json"
NAME_ANNOTATION = "io.containerd.image.name"


class _Hashing(io.RawIOBase):
    """A write-only stream that hashes and counts what passes through to `out`."""

    def __init__(self, out: BinaryIO) -> None:
        self.out, self.sha, self.size = out, hashlib.sha256(), 0

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.sha.update(data)
        self.size += len(data)
        return self.out.write(data)

    @property
    def digest(self) -> str:
        return f"sha256:{self.sha.hexdigest()}"


def _tar_info(path: str, entry: tuple) -> tarfile.TarInfo:
    info = tarfile.TarInfo(path.lstrip("/"))
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    info.mtime = EPOCH
    kind = entry[0]
    if kind == "dir":
        info.type, info.mode = tarfile.DIRTYPE, entry[1]
    elif kind == "symlink":
        info.type, info.linkname, info.mode = tarfile.SYMTYPE, entry[1], 0o777
    elif kind == "data":
        info.size, info.mode = len(entry[1]), entry[2]
    else:
        st = os.stat(entry[1])
        # The file's own mtime: Python checks its cached bytecode against its source's.
        info.size, info.mode, info.mtime = st.st_size, entry[2], int(st.st_mtime)
    return info


def write_layer(entries: Entries, out: Path) -> tuple[str, str, int]:
    """Writes the gzipped layer to `out`; (its digest, its diff_id, its size)."""
    with open(out, "wb") as raw:
        compressed = _Hashing(raw)
        with gzip.GzipFile(fileobj=compressed, mode="wb", compresslevel=GZIP_LEVEL, mtime=0) as gz:
            plain = _Hashing(gz)
            with tarfile.open(fileobj=plain, mode="w|", format=tarfile.PAX_FORMAT) as tar:
                for path, entry in sorted(entries.items()):
                    info = _tar_info(path, entry)
                    if entry[0] == "file":
                        with open(entry[1], "rb") as source:
                            tar.addfile(info, source)
                    elif entry[0] == "data":
                        tar.addfile(info, io.BytesIO(entry[1]))
                    else:
                        tar.addfile(info)
    return compressed.digest, plain.digest, compressed.size


def _json_blob(value: dict) -> tuple[bytes, str]:
    data = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    return data, f"sha256:{hashlib.sha256(data).hexdigest()}"


def write_archive(layer: Path, layer_meta: dict, refs: Sequence[str], out: Path,
                  config: Mapping[str, object], history: str) -> str:
    """The OCI layout tar of the one-layer image, named `refs`, run as `config` says (Env, Cmd,
    WorkingDir); returns the manifest digest."""
    config, config_digest = _json_blob({
        "architecture": "amd64", "os": "linux", "config": dict(config),
        "rootfs": {"type": "layers", "diff_ids": [layer_meta["diff_id"]]},
        "history": [{"created_by": history}]})
    manifest, manifest_digest = _json_blob({
        "schemaVersion": 2, "mediaType": MANIFEST_TYPE,
        "config": {"mediaType": CONFIG_TYPE, "digest": config_digest, "size": len(config)},
        "layers": [{"mediaType": LAYER_TYPE, "digest": layer_meta["digest"],
                    "size": layer_meta["size"]}]})
    # Each name also as repository@digest: the node's CRI finds a reference pinned by digest
    # (`repo:tag@sha256:...`) only under that name, and would otherwise try to pull it.
    by_digest = sorted({f"{ref.rpartition(':')[0]}@{manifest_digest}" for ref in refs})
    index, _ = _json_blob({"schemaVersion": 2, "mediaType": INDEX_TYPE, "manifests": [
        {"mediaType": MANIFEST_TYPE, "digest": manifest_digest, "size": len(manifest),
         "annotations": {NAME_ANNOTATION: ref,
                         **({} if "@" in ref else
                            {"org.opencontainers.image.ref.name": ref.rpartition(":")[2]})}}
        for ref in [*refs, *by_digest]]})

    def blob(digest: str) -> str:
        return f"blobs/sha256/{digest.removeprefix('sha256:')}"

    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in (("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'),
                           ("index.json", index), (blob(config_digest), config),
                           (blob(manifest_digest), manifest)):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, EPOCH
            tar.addfile(info, io.BytesIO(data))
        info = tar.gettarinfo(str(layer), blob(layer_meta["digest"]))
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        info.mtime = EPOCH
        with open(layer, "rb") as source:
            tar.addfile(info, source)
    return manifest_digest


def write_image(out: Path, refs: Sequence[str], entries: Entries, config: Mapping[str, object],
                history: str) -> str:
    """A whole small image at `out` (its layer written beside it first); the manifest digest."""
    layer = out.with_name(out.name + ".layer")
    digest, diff_id, size = write_layer(entries, layer)
    try:
        tmp = out.with_name(out.name + ".tmp")
        manifest = write_archive(layer, {"digest": digest, "diff_id": diff_id, "size": size},
                                 refs, tmp, config, history)
        os.replace(tmp, out)
        return manifest
    finally:
        layer.unlink(missing_ok=True)
