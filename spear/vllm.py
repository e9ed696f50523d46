"""vLLM's command line, rendered from the typed config: seed 001 step 3, flag by flag.

The one place that knows the flags: the pod's serve script runs what `command_line` returns,
the Kubernetes fleet runs it as the container's command, and the policy pack checks a command line
with the same constants. Pure and stdlib only, so the policy pack's virtualenv imports it too.

The cookbook's line has `--api-key "$VLLM_API_KEY"`; here the key is never on the command line
(anyone who can list processes reads it there): vLLM reads VLLM_API_KEY from its environment.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

# vLLM reads the key its clients must send from this variable, which a launcher sets from a
# file only its owner may read.
API_KEY_ENV = "VLLM_API_KEY"
API_KEY_FILE_MODE = 0o600
# The flag that would put the key on the command line instead.
API_KEY_FLAG = "--api-key"
# Seed 001 step 3: explicit and conservative (v0.24.0 defaults to 0.92), so the KV-memory choice
# is visible and stable.
GPU_MEMORY_UTILIZATION = "0.90"
# Seed 001 step 3: the model card's parser for Qwen3-Coder; without it (and without
# --enable-auto-tool-choice beside it) tool calls come back as text in `content`.
AUTO_TOOL_CHOICE = "--enable-auto-tool-choice"
TOOL_CALL_PARSER_FLAG = "--tool-call-parser"
TOOL_CALL_PARSER = "qwen3_coder"
# Engine bumps ("How to maintain it"): the --tool-call-parser names that run the model card's
# Qwen3-Coder parser, each with the first engine release that registers it for that parser:
# qwen3_coder since the parser came (v0.10.0, vllm-project/vllm#21396); qwen3_xml names the same
# parser from v0.24.0 (before, qwen3_xml was a parser of its own, which the cookbook never tested).
TOOL_CALL_PARSERS = {"qwen3_coder": (0, 10, 0), "qwen3_xml": (0, 24, 0)}
_ENGINE_TAG = re.compile(r"v?([0-9]+)\.([0-9]+)\.([0-9]+)(?:[.+-].*)?")
REVISION_FLAG = "--revision"
# Seed 001 "How to run it in production": the gateway stamps a priority on every request
# (lower is handled earlier); vLLM refuses a non-zero priority unless it was started with
# priority scheduling, so the flag and the field deploy together.
SCHEDULING_POLICY_FLAG = "--scheduling-policy"
PRIORITY_SCHEDULING = "priority"
# Seed 001 step 3: flags that must never be added, and why.
FORBIDDEN_FLAGS = {
    "--reasoning-parser": "the model has no thinking mode; a <think> block means the wrong"
                          " checkpoint or chat template, which a reasoning parser would hide",
    "--quantization": "the checkpoint's own config declares its FP8 scheme",
    "--enable-prefix-caching": "prefix caching is already on by default in v0.24.0",
    "--no-enable-prefix-caching": "it turns off the prefix cache: every agent turn would prefill"
                                  " its whole context again (cost, TTFT), and cache_salt would"
                                  " isolate nothing",
}


class ServeSettings(Protocol):
    """What `command_line` reads (config.types.Vllm has it): a shape, not an import, so that
    spear/ depends on nothing of the repository's own."""
    model: str
    revision: str
    served_model_name: str
    tensor_parallel_size: int
    max_model_len: int
    port: int
    gpu_memory_utilization: str
    scheduling_priority: bool
    tool_call_parser: str


def command_line(vllm: ServeSettings) -> list[str]:
    """`vllm serve ...` for these settings, as the cookbook writes it (without --api-key), with
    priority scheduling when the gateway stamps priorities."""
    return [
        "vllm", "serve", vllm.model,
        REVISION_FLAG, vllm.revision,
        "--served-model-name", vllm.served_model_name,
        "--tensor-parallel-size", str(vllm.tensor_parallel_size),
        "--max-model-len", str(vllm.max_model_len),
        "--gpu-memory-utilization", vllm.gpu_memory_utilization,
        AUTO_TOOL_CHOICE,
        TOOL_CALL_PARSER_FLAG, vllm.tool_call_parser,
        *([SCHEDULING_POLICY_FLAG, PRIORITY_SCHEDULING] if vllm.scheduling_priority else []),
        "--port", str(vllm.port),
    ]


def flags(argv: Sequence[str]) -> dict[str, str]:
    """`vllm serve <model> --flag value --switch` as {"model": "<model>", "--flag": "value",
    "--switch": "on"}: what a reviewer compares between two command lines."""
    parsed = {"model": argv[2]} if len(argv) > 2 else {}
    args = list(argv[3:])
    while args:
        name, eq, inline = args.pop(0).partition("=")
        if eq:
            parsed[name] = inline
        elif args and not args[0].startswith("--"):
            parsed[name] = args.pop(0)
        else:
            parsed[name] = "on"
    return parsed


def flag_name(arg: str) -> str:
    """`--quantization=fp8` and `--quantization` both name --quantization."""
    return arg.partition("=")[0]


def forbidden_flags(argv: Sequence[str]) -> list[str]:
    """The forbidden flags a command line gives, in order."""
    return [flag_name(arg) for arg in argv if flag_name(arg) in FORBIDDEN_FLAGS]


def priority_scheduling(argv: Sequence[str]) -> bool:
    """Whether vLLM runs with priority scheduling (the last --scheduling-policy wins)."""
    return flags(argv).get(SCHEDULING_POLICY_FLAG) == PRIORITY_SCHEDULING


def engine_version(tag: str | None) -> tuple[int, int, int] | None:
    """The engine release an image tag names (v0.24.0 -> (0, 24, 0)); None when it names none."""
    match = _ENGINE_TAG.fullmatch(tag) if isinstance(tag, str) else None
    return tuple(int(part) for part in match.groups()) if match else None


def tool_parser_problem(parser: object, engine_tag: str | None) -> str | None:
    """Why `parser` does not run the Qwen3-Coder parser on the engine `engine_tag` names; None
    when it does. An engine whose version the tag does not say (a digest alone) gets only the
    parser's first name."""
    since = TOOL_CALL_PARSERS.get(parser) if isinstance(parser, str) else None
    if since is None:
        return (f"{parser!r} is not a name of the Qwen3-Coder tool parser (one of"
                f" {', '.join(TOOL_CALL_PARSERS)})")
    version = engine_version(engine_tag)
    if version is None:
        return None if parser == TOOL_CALL_PARSER else (
            f"{parser!r} names the Qwen3-Coder parser only from v{'.'.join(map(str, since))}, and"
            f" the image tag {engine_tag!r} says no engine version")
    if version < since:
        return (f"{parser!r} names the Qwen3-Coder parser only from"
                f" v{'.'.join(map(str, since))}; the engine {engine_tag} is older")
    return None


def key_on_command_line(argv: Sequence[str]) -> bool:
    return any(flag_name(arg) == API_KEY_FLAG for arg in argv)


# Engine bumps and pair changes ("How to maintain it"): vLLM refuses to start when the GPUs it is
# given cannot hold the weights and one sequence of max_model_len tokens of KV cache. Checked
# before anything is deployed, from facts the stack declares per model.
BYTES_PER_PARAMETER = {"fp8": 1.0, "int8": 1.0, "bf16": 2.0, "fp16": 2.0, "int4": 0.5}
GIB = 1024 ** 3


def memory_floor_problem(*, parameters_billions: float, precision: str,
                         kv_cache_bytes_per_token: float, max_model_len: int,
                         gpu_memory_gib: float, gpu_memory_utilization: float,
                         tensor_parallel_size: int) -> str | None:
    """Why the weights and one full-length sequence's KV cache do not fit in what vLLM may use
    of the GPUs; None when they fit."""
    weights = parameters_billions * 1e9 * BYTES_PER_PARAMETER[precision]
    kv_cache = kv_cache_bytes_per_token * max_model_len
    usable = gpu_memory_gib * GIB * gpu_memory_utilization * tensor_parallel_size
    if weights + kv_cache <= usable:
        return None
    return (f"{weights / GIB:.1f} GiB of {precision} weights and {kv_cache / GIB:.1f} GiB of KV"
            f" cache for {max_model_len} tokens need more than the {usable / GIB:.1f} GiB vLLM may"
            f" use ({tensor_parallel_size} x {gpu_memory_gib:g} GiB x {gpu_memory_utilization:g})")
