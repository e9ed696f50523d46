"""How sources and shards reach the host, on a real host: a git source checked out at its pinned
commit, an archive and a model shard the host downloads from a URL, and content that does not
match its pin refused. (The scenario in test_inference_host.py covers uploads from this machine.)"""

from __future__ import annotations

import functools
import hashlib
import http.server
import subprocess
import tarfile
import threading

import pytest

from components.inference_host.llama_server_build import LlamaServerBuildProvider
from components.inference_host.model_files import ModelFilesProvider
from components.hostops.ssh import RemoteError, Session
from localhosts.hosts.host import start_host, stop_host


HOST = "it-fetch"
SSH_PORT = 2233
RUNTIME = "/opt/spear-fetch"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A folder of this machine served over HTTP on loopback, which the host shares."""
    folder = tmp_path_factory.mktemp("served")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield folder, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """A git repository with two commits; returns (path, first commit, second commit)."""
    path = tmp_path_factory.mktemp("repo")
    git = functools.partial(subprocess.run, cwd=path, check=True, capture_output=True, text=True)
    git(["git", "init", "-q"])
    commits = []
    for text in ("first\n", "second\n"):
        (path / "CMakeLists.txt").write_text(text)
        git(["git", "add", "."])
        git(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", text])
        commits.append(git(["git", "rev-parse", "HEAD"]).stdout.strip())
    return path, *commits


@pytest.fixture(scope="module")
def connection(repo):
    info = start_host(HOST, SSH_PORT, binds=[(str(repo[0]), "/srv/repo")])
    yield info.connection()
    stop_host(HOST, discard=True)


def fetch(connection, source, key):
    folder = f"{RUNTIME}/builds/{key}"
    props = {"connection": connection, "runtime_dir": RUNTIME, "source": source}
    with Session(connection) as host:
        subdir = LlamaServerBuildProvider()._fetch_source(host, props, folder)
        return subdir, host.read(f"{folder}/src/{subdir}/CMakeLists.txt")


def test_a_git_source_is_checked_out_at_its_pinned_commit(connection, repo):
    _, first, second = repo
    assert fetch(connection, {"git": "/srv/repo", "commit": first}, "git-first") == (".", "first\n")
    assert fetch(connection, {"git": "/srv/repo", "commit": second}, "git-second") == (".", "second\n")
    with pytest.raises(RemoteError, match="checkout"):
        fetch(connection, {"git": "/srv/repo", "commit": "f" * 40}, "git-missing")


def test_an_archive_url_is_downloaded_by_the_host_and_checked(connection, served, tmp_path):
    folder, base = served
    tree = tmp_path / "llama.cpp"
    tree.mkdir()
    (tree / "CMakeLists.txt").write_text("from the archive\n")
    archive = folder / "llama.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tree, arcname="pkg/llama.cpp")
    sha = hashlib.sha256(archive.read_bytes()).hexdigest()
    source = {"archive": f"{base}/llama.tar.gz", "sha256": sha, "subdir": "pkg/llama.cpp"}
    assert fetch(connection, source, "url") == ("pkg/llama.cpp", "from the archive\n")
    with pytest.raises(RemoteError, match="not the pinned"):
        fetch(connection, {**source, "sha256": "0" * 64}, "url-bad")
    with Session(connection) as host:  # the mismatching download is not kept
        assert host.run(f"test -e {RUNTIME}/sources/{'0' * 64}.archive", check=False).code != 0


def test_a_model_shard_is_downloaded_by_the_host_and_verified(connection, served):
    folder, base = served
    shard = folder / "shard.gguf"
    shard.write_bytes(b"GGUF" + bytes(1000))
    entry = {"name": "shard.gguf", "size": shard.stat().st_size,
             "sha256": hashlib.sha256(shard.read_bytes()).hexdigest(), "source": f"{base}/shard.gguf"}
    props = {"connection": connection, "runtime_dir": RUNTIME, "shards": [entry], "digest": "d1"}
    out = ModelFilesProvider().apply(props, olds=None)
    assert out["fetched"] == ["shard.gguf"] and out["model_path"] == f"{RUNTIME}/models/gguf/shard.gguf"
    # Verified once, remembered: the next update fetches nothing.
    assert ModelFilesProvider().apply(props, olds=props)["fetched"] == []
    wrong = {**entry, "name": "wrong.gguf", "sha256": "1" * 64}
    with pytest.raises(RemoteError, match="does not match the manifest"):
        ModelFilesProvider().apply({**props, "shards": [wrong]}, olds=props)
    missing = {**entry, "name": "absent.gguf", "source": None}
    with pytest.raises(RemoteError, match="gives no source"):
        ModelFilesProvider().apply({**props, "shards": [missing]}, olds=props)
