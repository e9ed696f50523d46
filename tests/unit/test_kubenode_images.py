"""localhosts/kube/kubenode.py's image loading: an archive whose images the node holds already,
at the same digests, is not read again."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from localhosts.kube import kubenode

SEAT = "localhost/spear-fleet/seat:h-1"
DIGEST, OTHER = "sha256:" + "a" * 64, "sha256:" + "b" * 64


def archive(path: Path, names: dict[str, str]) -> Path:
    """An OCI archive: its index.json naming `names` (image -> manifest digest), then a blob."""
    index = {"schemaVersion": 2, "manifests": [
        {"digest": digest, "annotations": {"io.containerd.image.name": name}}
        for name, digest in names.items()]}
    with tarfile.open(path, "w") as tar:
        for name, data in (("oci-layout", b'{"imageLayoutVersion": "1.0.0"}'),
                           ("index.json", json.dumps(index).encode()),
                           (f"blobs/sha256/{'c' * 64}", b"layer")):
            member = tarfile.TarInfo(name)
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
    return path


@pytest.fixture()
def node(monkeypatch):
    """The node's containerd as `ctr images ls` shows it (REF TYPE DIGEST ...), and the commands
    run against it."""
    class Node:
        def __init__(self) -> None:
            self.images: dict[str, str] = {}
            self.ran: list[list[str]] = []

        def run(self, args: list[str], check: bool = True) -> str:
            self.ran.append(args)
            if args[-2:] == ["images", "ls"]:
                return "REF TYPE DIGEST SIZE PLATFORMS LABELS\n" + "".join(
                    f"{ref} application/vnd.oci.image.manifest.v1+json {digest} 1.0 MiB linux/amd64 -\n"
                    for ref, digest in self.images.items())
            return ""

    fake = Node()
    monkeypatch.setattr(kubenode, "_run", fake.run)
    monkeypatch.setattr(kubenode.kubebuild, "node", lambda: type("Built", (), {
        "path": staticmethod(lambda name: Path("/node") / name)})())
    return fake


def imported(node) -> list[str]:
    return [args[-1] for args in node.ran if args[-3:-1] == ["images", "import"]]


def test_an_archive_names_its_images_and_their_manifest_digests(tmp_path):
    assert kubenode.archive_images(archive(tmp_path / "a.tar", {SEAT: DIGEST})) == {SEAT: DIGEST}
    assert kubenode.archive_images(archive(tmp_path / "b.tar", {})) == {}


def test_an_archive_whose_images_the_node_holds_at_the_same_digest_is_not_imported(tmp_path, node):
    node.images = {SEAT: DIGEST}
    kubenode.import_images([archive(tmp_path / "a.tar", {SEAT: DIGEST})])
    assert imported(node) == []


@pytest.mark.parametrize("held", [{}, {SEAT: OTHER}], ids=["absent", "another digest"])
def test_an_archive_with_an_image_the_node_lacks_or_holds_at_another_digest_is_imported(
        tmp_path, node, held):
    node.images = held
    path = archive(tmp_path / "a.tar", {SEAT: DIGEST})
    kubenode.import_images([path])
    assert imported(node) == [str(path)]


def test_an_archive_that_names_no_image_is_imported(tmp_path, node):
    path = archive(tmp_path / "a.tar", {})
    kubenode.import_images([path])
    assert imported(node) == [str(path)]
