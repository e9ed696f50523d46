"""The offline query engine's translator (hosts/gateway/prisma-offline: prisma-client-py's GraphQL
-> Prisma's JSON protocol and back), tested in node with its own tests (`node --test`), against
the real DMMF of a schema with every tagged type. The modules come from the bundle the gateway
hosts get (npm ci, cached by content)."""

from __future__ import annotations

import os
import shutil
import subprocess

from localhosts.servers.litellm_venv import offline_bundle_dir
from localhosts.servers.litellm_proxy import GATEWAY_DIR

ENGINE_DIR = GATEWAY_DIR / "prisma-offline"


def test_the_translator_passes_its_node_tests():
    node = shutil.which("node")
    assert node, "node (>= 18) is needed for the offline query engine and its tests"
    env = {**os.environ, "NODE_PATH": str(offline_bundle_dir() / "node_modules")}
    tests = sorted(str(p) for p in (ENGINE_DIR / "test").glob("*.test.js"))
    assert len(tests) >= 3, tests
    out = subprocess.run([node, "--test", *tests], cwd=ENGINE_DIR, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]
    assert "# fail 0" in out.stdout
