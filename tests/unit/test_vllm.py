"""vLLM's command line (spear/vllm.py) is the cookbook's, flag by flag, with the key kept off it;
and the pod's serve script runs exactly that line with the key in the environment only."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from components.endpoints.pod_vllm import SERVE_SCRIPT
from config.types import Vllm
from spear import vllm
from tests.support.policy_harness import COOKBOOK_VLLM_COMMAND_LINE

# Seed 001 steps 2-3: the cookbook's values.
COOKBOOK = Vllm(model="Qwen/Qwen3-Coder-Next-FP8", revision="da6e2ed27304dd39abadd9c82ef50e8de67bdd4c",
                served_model_name="qwen3-coder-next", tensor_parallel_size=2,
                max_model_len=262144, port=8000)
KEY = "sk-test-0123456789"


def test_the_rendered_line_is_the_cookbooks_line_for_the_cookbooks_values():
    assert vllm.command_line(COOKBOOK) == COOKBOOK_VLLM_COMMAND_LINE


def test_the_key_and_the_forbidden_flags_are_never_rendered():
    argv = vllm.command_line(COOKBOOK)
    assert not vllm.key_on_command_line(argv)
    assert vllm.forbidden_flags(argv) == []


def test_forbidden_flags_are_found_in_either_form_in_order():
    argv = ["vllm", "serve", "m", "--quantization=fp8", "--max-num-seqs", "64",
            "--reasoning-parser", "qwen3", "--no-enable-prefix-caching"]
    assert vllm.forbidden_flags(argv) == ["--quantization", "--reasoning-parser",
                                          "--no-enable-prefix-caching"]
    assert vllm.key_on_command_line(["--api-key=x"]) and vllm.key_on_command_line(["--api-key", "x"])


# ---------------------------------------------------------------------------------------------
# hosts/pod/serve-vllm.sh, run here with a `vllm` that records what it was given


@pytest.fixture
def pod(tmp_path: Path) -> dict[str, Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "vllm"
    fake.write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$RECORD.argv"\n'
                    'printf "%s" "$VLLM_API_KEY" > "$RECORD.key"\n')
    fake.chmod(0o755)
    args, env = tmp_path / "vllm.args", tmp_path / "vllm.env"
    args.write_text("\n".join(vllm.command_line(COOKBOOK)) + "\n")
    env.write_text(f"VLLM_API_KEY='{KEY}'\n")
    env.chmod(0o600)
    return {"bin": bin_dir, "args": args, "env": env, "record": tmp_path / "record"}


def serve(pod: dict[str, Path]) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SERVE_SCRIPT)], capture_output=True, text=True, check=False,
        env={"PATH": f"{pod['bin']}:{os.environ['PATH']}", "SPEAR_VLLM_ARGS": str(pod["args"]),
             "SPEAR_VLLM_ENV": str(pod["env"]), "RECORD": str(pod["record"])})


def test_serve_script_runs_the_rendered_line_with_the_key_in_the_environment_only(pod):
    result = serve(pod)
    assert result.returncode == 0, result.stderr
    argv = Path(f"{pod['record']}.argv").read_text().splitlines()
    assert ["vllm", *argv] == vllm.command_line(COOKBOOK)
    assert Path(f"{pod['record']}.key").read_text() == KEY
    assert KEY not in result.stderr


def test_serve_script_refuses_a_key_file_others_can_read(pod):
    pod["env"].chmod(0o644)
    result = serve(pod)
    assert result.returncode == 2
    assert "its mode must be 600, not 644" in result.stderr


def test_serve_script_refuses_the_key_on_the_command_line(pod):
    pod["args"].write_text(pod["args"].read_text() + "--api-key\n$VLLM_API_KEY\n")
    result = serve(pod)
    assert result.returncode == 2
    assert "puts the API key on the command line" in result.stderr


def test_serve_script_refuses_an_environment_file_without_the_key(pod):
    pod["env"].write_text("OTHER=1\n")
    result = serve(pod)
    assert result.returncode == 2
    assert "sets no VLLM_API_KEY" in result.stderr


@pytest.mark.parametrize("parser,tag", [("qwen3_coder", "v0.10.0"), ("qwen3_coder", "v0.26.0"),
                                        ("qwen3_xml", "v0.24.0"), ("qwen3_xml", "v0.25.1"),
                                        ("qwen3_coder", None)])
def test_a_name_the_engine_gives_the_qwen3_coder_parser_is_no_problem(parser, tag):
    assert vllm.tool_parser_problem(parser, tag) is None


@pytest.mark.parametrize("parser,tag,why", [
    ("qwen3_xml", "v0.23.1", "'qwen3_xml' names the Qwen3-Coder parser only from v0.24.0; the"
                             " engine v0.23.1 is older"),
    ("qwen3_coder", "v0.9.2", "'qwen3_coder' names the Qwen3-Coder parser only from v0.10.0"),
    ("qwen3_xml", None, "'qwen3_xml' names the Qwen3-Coder parser only from v0.24.0, and the"
                        " image tag None says no engine version"),
    ("hermes", "v0.24.0", "'hermes' is not a name of the Qwen3-Coder tool parser (one of"
                          " qwen3_coder, qwen3_xml)"),
])
def test_a_parser_name_the_engine_does_not_give_that_parser_is_refused_with_why(parser, tag, why):
    assert vllm.tool_parser_problem(parser, tag).startswith(why)


def test_the_memory_floor_is_weights_plus_one_full_sequences_kv_cache_against_usable_gpu_memory():
    fits = dict(parameters_billions=80, precision="fp8", kv_cache_bytes_per_token=24576,
                max_model_len=262144, gpu_memory_gib=80, gpu_memory_utilization=0.9,
                tensor_parallel_size=2)
    assert vllm.memory_floor_problem(**fits) is None
    assert vllm.memory_floor_problem(**{**fits, "tensor_parallel_size": 1}) == (
        "74.5 GiB of fp8 weights and 6.0 GiB of KV cache for 262144 tokens need more than the"
        " 72.0 GiB vLLM may use (1 x 80 GiB x 0.9)")
