"""The shared-state tests' S3 server's jar (localhosts/servers/s3_server.py) is taken only with the digest
it is pinned by: a different file is refused and leaves nothing in the cache."""

from __future__ import annotations

import hashlib

import pytest

from localhosts.servers import s3_server


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPEAR_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def published(tmp_path, monkeypatch, data: bytes, pinned: bytes) -> None:
    jar = tmp_path / "published.jar"
    jar.write_bytes(data)
    monkeypatch.setattr(s3_server, "JAR_URL", jar.as_uri())
    monkeypatch.setattr(s3_server, "JAR_SHA256", hashlib.sha256(pinned).hexdigest())


def test_a_jar_with_another_digest_is_refused_and_nothing_is_kept(tmp_path, monkeypatch, cache):
    published(tmp_path, monkeypatch, b"tampered", pinned=b"the release")
    with pytest.raises(RuntimeError, match="expected"):
        s3_server.ensure_jar()
    assert not [p for p in (cache / "s3proxy").iterdir() if p.name != ".lock"]


def test_the_pinned_jar_is_downloaded_once_and_then_reused(tmp_path, monkeypatch, cache):
    published(tmp_path, monkeypatch, b"the release", pinned=b"the release")
    jar = s3_server.ensure_jar()
    assert jar == cache / "s3proxy" / s3_server.JAR and jar.read_bytes() == b"the release"
    (tmp_path / "published.jar").unlink()  # a second call never asks again
    assert s3_server.ensure_jar() == jar
