"""__main__ under Pulumi's mocks: the prod stack's config becomes the inference host's
resources, with the seed's command line and the unit in system.slice. (That the SSH key
stays secret is checked on the real engine's state, in test_inference_host.py.)"""

from __future__ import annotations

import runpy

import pulumi
import pytest

from tests.stack_files import REPO, SEED_COMMAND_LINE, RecordingMocks, engine_config, prod_raw



@pytest.fixture
def prod_program():
    mocks = RecordingMocks()
    pulumi.runtime.set_mocks(mocks, project="spear-fleet", stack="prod")
    pulumi.runtime.set_all_config(engine_config(prod_raw()), ["spear-fleet:sshPrivateKey"])
    yield mocks
    pulumi.runtime.set_all_config({}, [])


@pulumi.runtime.test
def run_main():
    runpy.run_path(str(REPO / "__main__.py"))


def kinds(mocks: RecordingMocks) -> dict[str, str]:
    return {name: args.inputs.get("spear_kind") for name, args in mocks.resources.items()}


def test_prod_declares_each_part_of_the_inference_host(prod_program):
    run_main()
    assert kinds(prod_program) == {
        "inference": None,
        "inference-llama-server": "llama-server-build",
        "inference-model": "model-files",
        "inference-serve-sh": "launcher",
        "inference-server-conf": "server-conf",
        "inference-unit": "systemd-unit",
        "inference-smoke-test": "smoke-test",
    }
    assert prod_program.resources["inference"].typ == "spear:fleet:InferenceHost"
    for name, args in prod_program.resources.items():
        if name != "inference":
            assert args.typ == "pulumi-python:dynamic:Resource"


def test_prod_renders_the_seed_command_line_and_places_the_unit(prod_program):
    run_main()
    conf = prod_program.resources["inference-server-conf"].inputs
    assert conf["command_line"] == SEED_COMMAND_LINE
    assert conf["path"] == "/opt/spear/config/server.conf"
    assert conf["binds"] == [{"host": "reds.internal:22", "address": "127.0.0.1", "port": 8010,
                              "what": "llama-server"}]
    unit = prod_program.resources["inference-unit"].inputs
    assert unit["slice"] == "system.slice"
    assert "Slice=system.slice" in unit["content"]
    assert unit["unit_path"] == "/etc/systemd/system/spear-inference.service"
    build = prod_program.resources["inference-llama-server"].inputs
    assert build["source"]["commit"] == prod_raw()["llamaCpp"]["source"]["commit"]
    assert "-DGGML_CUDA=ON" in build["cmake_flags"]


def test_prod_restart_triggers_name_what_restarts_the_server(prod_program):
    run_main()
    triggers = prod_program.resources["inference-unit"].inputs["restart_triggers"]
    assert set(triggers) == {"build_key", "model", "server_conf", "launcher"}
    assert triggers["build_key"] == prod_program.resources["inference-llama-server"].inputs["build_key"]
