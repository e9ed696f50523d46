"""The plugins built beside the engine (the command provider in scripts/setup-engine.sh, the
kubernetes provider in localhosts/kube/kubebuild.py) pin the engine's version of each module they
share with it, so the engine's build compiles those packages for them too (with the same tags:
engine/go-build.env). One older than the engine's would be a second compile of it and of every
package above it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENGINE = REPO / "engine" / "pulumi-cli" / "go.mod"
PLUGINS = [REPO / "engine" / "pulumi-command" / "go.mod", REPO / "localhosts" / "kube" / "provider" / "go.mod"]
# What the plugins would compile again at another version: the SDK and its RPC stack.
CORE = ("github.com/pulumi/pulumi/sdk/v3", "github.com/pulumi/pulumi/pkg/v3", "google.golang.org/grpc",
        "google.golang.org/protobuf")
REQUIRE = re.compile(r"^\s*(?:require\s+)?([\w./~-]+)\s+(v[^\s]+)(?:\s+//.*)?$", re.M)


def requirements(go_mod: Path) -> dict[str, str]:
    text = go_mod.read_text()
    replaced = set(re.findall(r"^replace\s+(\S+)", text, re.M))
    return {module: version for module, version in REQUIRE.findall(text)
            if module not in replaced and module not in ("module", "go", "toolchain")}


def semver(version: str) -> tuple:
    release = re.match(r"v(\d+)\.(\d+)\.(\d+)", version)
    return tuple(int(n) for n in release.groups()) if release else ()


@pytest.mark.parametrize("go_mod", PLUGINS, ids=[p.parent.name for p in PLUGINS])
def test_a_plugin_pins_the_engines_sdk_and_rpc_stack_and_no_module_older_than_the_engines(go_mod):
    engine, plugin = requirements(ENGINE), requirements(go_mod)
    assert {m: plugin.get(m) for m in CORE} == {m: engine[m] for m in CORE}
    older = {m: (v, engine[m]) for m, v in plugin.items()
             if m in engine and semver(v) < semver(engine[m])}
    assert older == {}


def test_the_reading_of_a_go_mod_sees_its_requirements(tmp_path):
    go_mod = tmp_path / "go.mod"
    go_mod.write_text("module example.com/a\n\ngo 1.26\n\nrequire example.com/b v1.2.3\n\n"
                      "require (\n\texample.com/c v0.1.0 // indirect\n\texample.com/d v2.0.0+incompatible\n)\n\n"
                      "replace example.com/d => ../d\n")
    assert requirements(go_mod) == {"example.com/b": "v1.2.3", "example.com/c": "v0.1.0"}
