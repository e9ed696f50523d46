"""The serving image's archive (localhosts/images/serving_image/build.py, written by localhosts/images/oci.py) on
a few small files: an OCI image layout whose index names every tag, whose manifest, config and
layer are the blobs their digests name, and whose layer holds what it was given, symlinks and
modes included."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from localhosts.images import oci
from localhosts.images.serving_image import build


@pytest.fixture
def archive(tmp_path: Path) -> tuple[Path, str]:
    """(archive, manifest digest) of a two-tag image of a script, a data file, a symlink, /tmp."""
    script = tmp_path / "vllm"
    script.write_text("#!/usr/bin/python3\nprint('hi')\n")
    script.chmod(0o755)
    entries = {"/usr/local/bin/vllm": ("file", str(script), 0o755),
               "/etc/vllm-standin.json": ("data", b"{}", 0o644),
               "/bin": ("symlink", "usr/bin"),
               "/tmp": ("dir", 0o1777)}
    entries |= {"/usr": ("dir", 0o755), "/usr/local": ("dir", 0o755),
                "/usr/local/bin": ("dir", 0o755), "/etc": ("dir", 0o755)}
    layer = tmp_path / "layer.tar.gz"
    digest, diff_id, size = oci.write_layer(entries, layer)
    out = tmp_path / "image.tar"
    refs = (f"{build.REPOSITORY}:v0.24.0", f"{build.REPOSITORY}:v0.24.1")
    manifest_digest = oci.write_archive(
        layer, {"digest": digest, "diff_id": diff_id, "size": size}, refs, out, build.image_config(),
        history="test")
    return out, manifest_digest


def blobs(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def sha(data: bytes) -> str:
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


def blob(files: dict[str, bytes], digest: str) -> bytes:
    data = files[f"blobs/sha256/{digest.removeprefix('sha256:')}"]
    assert sha(data) == digest
    return data


def test_the_index_names_the_image_with_each_tag_and_by_digest_by_containerds_annotation(archive):
    path, digest = archive
    files = blobs(path)
    assert json.loads(files["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    index = json.loads(files["index.json"])
    assert index["mediaType"] == oci.INDEX_TYPE
    assert [m["annotations"][oci.NAME_ANNOTATION] for m in index["manifests"]] == [
        "localhost/spear-fleet/vllm-standin:v0.24.0", "localhost/spear-fleet/vllm-standin:v0.24.1",
        f"localhost/spear-fleet/vllm-standin@{digest}"]
    assert {m["digest"] for m in index["manifests"]} == {digest}
    # A digest name has no tag for OCI's ref.name.
    assert "org.opencontainers.image.ref.name" not in index["manifests"][2]["annotations"]


def test_every_blob_is_named_by_its_digest_and_sized_as_its_descriptor_says(archive):
    path, digest = archive
    files = blobs(path)
    (entry, _, _) = json.loads(files["index.json"])["manifests"]
    manifest_bytes = blob(files, digest)
    assert len(manifest_bytes) == entry["size"]
    manifest = json.loads(manifest_bytes)
    assert manifest["mediaType"] == oci.MANIFEST_TYPE
    config = blob(files, manifest["config"]["digest"])
    assert len(config) == manifest["config"]["size"]
    (layer,) = manifest["layers"]
    assert layer["mediaType"] == "application/vnd.oci.image.layer.v1.tar+gzip"
    layer_bytes = blob(files, layer["digest"])
    assert len(layer_bytes) == layer["size"]
    # The config's diff_id is the digest of the uncompressed layer.
    assert json.loads(config)["rootfs"] == {"type": "layers",
                                            "diff_ids": [sha(gzip.decompress(layer_bytes))]}
    assert len(files) == 5  # oci-layout, index.json and the three blobs


def test_the_config_runs_vllm_serve_with_a_path_and_no_entrypoint(archive):
    path, digest = archive
    files = blobs(path)
    config = json.loads(blob(files, json.loads(blob(files, digest))["config"]["digest"]))
    assert (config["os"], config["architecture"]) == ("linux", "amd64")
    assert config["config"]["Cmd"] == ["vllm", "serve"]
    assert "Entrypoint" not in config["config"]
    assert config["config"]["Env"] == [build.PATH_ENV]


def test_the_layer_holds_the_files_with_their_modes_the_symlink_and_a_sticky_tmp(archive):
    path, digest = archive
    files = blobs(path)
    layer = json.loads(blob(files, digest))["layers"][0]["digest"]
    with tarfile.open(fileobj=io.BytesIO(blob(files, layer)), mode="r:gz") as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert tar.extractfile("usr/local/bin/vllm").read().startswith(b"#!/usr/bin/python3\n")
    assert list(members) == sorted(members)  # parents before what they hold
    assert members["usr/local/bin/vllm"].mode == 0o755
    assert members["bin"].issym() and members["bin"].linkname == "usr/bin"
    assert members["tmp"].isdir() and members["tmp"].mode == 0o1777
    assert all(m.uid == 0 and m.gid == 0 for m in members.values())


def test_the_same_files_make_the_same_layer(tmp_path):
    entries = {"/etc/group": ("data", b"root:x:0:\n", 0o644), "/etc": ("dir", 0o755)}
    first = oci.write_layer(entries, tmp_path / "a.tar.gz")
    assert oci.write_layer(entries, tmp_path / "b.tar.gz") == first


def test_a_path_through_a_symlinked_folder_adds_the_symlink_and_the_real_path(tmp_path):
    (tmp_path / "usr/lib").mkdir(parents=True)
    (tmp_path / "usr/lib/libz.so.1.2.13").write_bytes(b"\x7fELF")
    os.symlink("libz.so.1.2.13", tmp_path / "usr/lib/libz.so.1")
    os.symlink("usr/lib", tmp_path / "lib")
    entries: oci.Entries = {}
    build.add_host_file(str(tmp_path / "lib/libz.so.1"), entries)
    assert entries == {
        str(tmp_path / "lib"): ("symlink", "usr/lib"),
        str(tmp_path / "usr/lib/libz.so.1"): ("symlink", "libz.so.1.2.13"),
        str(tmp_path / "usr/lib/libz.so.1.2.13"): ("file", str(tmp_path / "usr/lib/libz.so.1.2.13"),
                                                   0o644)}


def test_the_config_serves_the_stable_model_and_the_parser_trap_from_the_image(tmp_path):
    models = {"smoke": tmp_path / "a.gguf", "no_tool_template": tmp_path / "b.gguf"}
    config = build.standin_config(models)
    assert config["host"] == "0.0.0.0"
    assert config["llama_server"] == f"{build.LLAMA_DIR}/llama-server"
    stable = config["models"]["Qwen/Qwen3-Coder-Next-FP8"]
    trap = config["models"]["spear-fleet/tiny-no-tool-template"]
    assert stable["gguf"] == f"{build.MODELS_DIR}/a.gguf"
    # One sampling seed: a harness's tool call (random among its tools) is the same every run.
    assert stable["flags"] == ["--seed", "1234"]
    assert trap["flags"] == ["--chat-template", "chatml"]
