"""__main__ under Pulumi's mocks: the prod stack's config becomes the inference host's
resources, with the seed's command line and the unit in system.slice. (That the SSH key
stays secret is checked on the real engine's state, in test_inference_host.py.)"""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from spear import tokens
from tests.support.stack_files import (REPO, SEED_COMMAND_LINE, RecordingMocks, mocked_stack,
                                       prod_raw, run_main)


@pytest.fixture
def prod_program():
    with mocked_stack(prod_raw()) as mocks:
        yield mocks


def types(mocks: RecordingMocks) -> dict[str, str]:
    return {name: args.typ for name, args in mocks.resources.items()}


def test_prod_declares_each_part_of_the_inference_host_each_with_its_own_type(prod_program):
    run_main()
    host_parts = {name: kind for name, kind in types(prod_program).items() if name.startswith("reds")}
    assert host_parts == {
        "reds": "spear:inference:InferenceHost",
        "reds-llama-server": "pulumi-python:dynamic/spear:LlamaServerBuild",
        "reds-model": "pulumi-python:dynamic/spear:ModelFiles",
        "reds-serve-sh": "pulumi-python:dynamic/spear:Launcher",
        "reds-server-conf": "pulumi-python:dynamic/spear:ServerConf",
        "reds-unit": "pulumi-python:dynamic/spear:SystemdUnit",
        "reds-smoke-test": "pulumi-python:dynamic/spear:SmokeTest",
        "reds-verification": "pulumi-python:dynamic/spear:EndpointVerification",
        "reds-host-key": "pulumi-python:dynamic/spear:HostKey",
    }
    assert types(prod_program)["reds-server-conf"] == tokens.SERVER_CONF.type


def test_prod_renders_the_seed_command_line_and_places_the_unit(prod_program):
    run_main()
    conf = prod_program.resources["reds-server-conf"].inputs
    assert conf["command_line"] == SEED_COMMAND_LINE
    assert conf["path"] == "/opt/spear/config/server.conf"
    assert conf["binds"] == [{"host": "reds.internal:22", "address": "127.0.0.1", "port": 8010,
                              "what": "llama-server"}]
    unit = prod_program.resources["reds-unit"].inputs
    assert unit["slice"] == "system.slice"
    assert "Slice=system.slice" in unit["content"]
    assert unit["unit_path"] == "/etc/systemd/system/spear-inference.service"
    build = prod_program.resources["reds-llama-server"].inputs
    assert build["source"]["commit"] == prod_raw()["inferenceHosts"]["reds"]["llamaCpp"]["source"]["commit"]
    assert "-DGGML_CUDA=ON" in build["cmake_flags"]


def test_prod_restart_triggers_name_what_restarts_the_server(prod_program):
    run_main()
    triggers = prod_program.resources["reds-unit"].inputs["restart_triggers"]
    assert set(triggers) == {"build_key", "model", "server_conf", "launcher"}
    assert triggers["build_key"] == prod_program.resources["reds-llama-server"].inputs["build_key"]


def test_the_programs_imports_load_no_kubernetes_api_group_until_a_stack_makes_one():
    """A stack without a cluster never pays for pulumi_kubernetes' generated modules (0.6 s of
    every preview, docs/BENCHMARKS.md "Preview at scale"): they load when a resource is made."""
    tree = ast.parse((REPO / "__main__.py").read_text())
    modules = sorted({node.module for node in ast.walk(tree)
                      if isinstance(node, ast.ImportFrom) and node.module})
    probe = ("import importlib, sys\n"
             f"for module in {modules!r}:\n    importlib.import_module(module)\n"
             "print(sorted(m for m in sys.modules if m.startswith('pulumi_kubernetes.')"
             " and m.endswith('.v1')))")
    loaded = subprocess.run([sys.executable, "-c", probe], cwd=REPO, check=True,
                            capture_output=True, text=True).stdout
    assert "components.agent_seats" in modules and loaded.strip() == "[]"
