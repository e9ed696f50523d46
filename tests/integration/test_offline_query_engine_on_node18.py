"""The offline query engine on the gateway host's Node: Debian bookworm's nodejs 18 (this machine
has Node 20), run in a chroot of the local gateway host's root filesystem, serving GraphQL the
way prisma-client-py sends it against real PostgreSQL."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from localhosts.servers.litellm_venv import offline_bundle_dir
from localhosts.hosts.rootfs import ensure_rootfs, extract_rootfs
from localhosts.servers.litellm_proxy import GATEWAY_DIR
from localhosts.servers.postgres import postgres_database

ENGINE_PORT = 4118  # this helper's range (4100-4119)
SCHEMA = """
datasource db {
  provider = "postgresql"
  url      = env("DATABASE_URL")
}

model Item {
  id   String    @id
  meta Json?
  at   DateTime?
  big  BigInt?
}
"""


@pytest.fixture(scope="module")
def bookworm(tmp_path_factory) -> Path:
    """A bookworm root with the engine bundle (and its tests) in /opt/prisma-offline."""
    root = tmp_path_factory.mktemp("bookworm") / "root"
    extract_rootfs(ensure_rootfs(), root)
    engine = root / "opt" / "prisma-offline"
    shutil.copytree(offline_bundle_dir(), engine, symlinks=True)
    shutil.copytree(GATEWAY_DIR / "prisma-offline" / "test", engine / "test")
    (root / "opt" / "schema.prisma").write_text(SCHEMA)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def in_chroot(root: Path, *cmd: str, env: dict[str, str] | None = None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["chroot", str(root), "env", "-i", "PATH=/usr/bin:/bin",
                           *(f"{k}={v}" for k, v in (env or {}).items()), *cmd],
                          capture_output=True, text=True, **kw)


def graphql(query: str) -> dict:
    body = json.dumps({"variables": {}, "operation_name": "mutation", "query": query}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{ENGINE_PORT}/", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.load(resp)


def test_the_node_tests_and_version_pass_on_bookworms_node_18(bookworm):
    assert in_chroot(bookworm, "node", "--version").stdout.startswith("v18.")
    version = in_chroot(bookworm, "/opt/prisma-offline/query-engine", "--version")
    assert version.stdout.strip() == "query-engine 393aa359c9ad4a4bb28630fb5613f9c281cde053", version.stderr
    tests = in_chroot(bookworm, "sh", "-c", "cd /opt/prisma-offline && node --test test/", timeout=300)
    assert tests.returncode == 0 and "# fail 0" in tests.stdout, tests.stdout[-4000:]


def test_the_engine_serves_graphql_against_postgresql_on_node_18(bookworm):
    with postgres_database() as db:
        db.psql('CREATE TABLE "Item" (id text PRIMARY KEY, meta jsonb, at timestamp(3), big bigint)')
        env = {"PRISMA_DML_PATH": "/opt/schema.prisma", "DATABASE_URL": db.url}
        engine = subprocess.Popen(
            ["chroot", str(bookworm), "env", "-i", "PATH=/usr/bin:/bin",
             *(f"{k}={v}" for k, v in env.items()),
             "/opt/prisma-offline/query-engine", "-p", str(ENGINE_PORT)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 30
            while True:
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", ENGINE_PORT)) == 0:
                        break
                assert engine.poll() is None, engine.stdout.read()
                assert time.monotonic() < deadline, "the engine did not listen within 30 s"
                time.sleep(0.2)
            created = graphql('mutation {\n  result: createOneItem\n  (\n    data: {\n'
                              '      id: "a"\n      meta: "{\\"developer\\": \\"ana\\"}"\n'
                              '      at: "2031-01-02T03:04:05+00:00"\n      big: 42\n    }\n  )\n'
                              '  {\n    id\n    meta\n    at\n    big\n  }\n}')
            assert created == {"data": {"result": {"id": "a", "meta": '{"developer":"ana"}',
                                                   "at": "2031-01-02T03:04:05.000Z", "big": "42"}}}
            duplicate = graphql('mutation { result: createOneItem(data: { id: "a" }) { id } }')
            assert duplicate["errors"][0]["user_facing_error"]["error_code"] == "P2002"
            start = urllib.request.Request(f"http://127.0.0.1:{ENGINE_PORT}/transaction/start",
                                           data=b'{"max_wait": 2000, "timeout": 5000}')
            with urllib.request.urlopen(start, timeout=30) as resp:
                tx = json.load(resp)["id"]  # transaction ids need node:crypto on Node 18
            rollback = urllib.request.Request(
                f"http://127.0.0.1:{ENGINE_PORT}/transaction/{tx}/rollback", data=b"")
            with urllib.request.urlopen(rollback, timeout=30) as resp:
                assert json.load(resp) == {}
            assert db.psql('SELECT big FROM "Item" WHERE id = \'a\'') == "42"
        finally:
            engine.send_signal(2)  # SIGINT, as prisma-client-py stops it
            engine.wait(timeout=30)
