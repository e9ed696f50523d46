"""serve.sh: its flag logic, run for real with a stand-in llama-server that prints its argv,
and the production stack's command line against seed 6.2.1, flag by flag."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from components.inference_host import render
from tests.support.stack_files import REPO, SEED_COMMAND_LINE, stack_host

SERVE_SH = REPO / "hosts" / "inference" / "serve.sh"
STAND_IN = "#!/bin/sh\nprintf '%s\\n' \"$@\"\n"  # a llama-server that prints its arguments


@pytest.fixture
def host(tmp_path):
    """A runtime folder laid out as on a host: bin/serve.sh, config/, models/, current/bin/."""
    runtime = tmp_path / "runtime"
    for folder in ("bin", "config", "models/gguf", "models/lora", "current/bin"):
        (runtime / folder).mkdir(parents=True)
    shutil.copy(SERVE_SH, runtime / "bin" / "serve.sh")
    server = runtime / "current" / "bin" / "llama-server"
    server.write_text(STAND_IN)
    server.chmod(0o755)
    (runtime / "models" / "gguf" / "m-00001-of-00002.gguf").write_bytes(b"GGUF")
    (runtime / "models" / "lora" / "a.gguf").write_bytes(b"GGUF")
    return runtime


def model(runtime: Path) -> str:
    return str(runtime / "models" / "gguf" / "m-00001-of-00002.gguf")


def base_conf(runtime: Path, **overrides: str | None) -> dict[str, str]:
    conf = {"SPEAR_SERVER_MODEL": model(runtime), "SPEAR_SERVER_CTX": "4096",
            "SPEAR_SERVER_NATIVE_CTX": "8192", "SPEAR_SERVER_ARCH": "llama"}
    conf.update(overrides)
    return {key: value for key, value in conf.items() if value is not None}


def run(runtime: Path, conf: dict[str, str] | None, env: dict[str, str] | None = None,
        ) -> subprocess.CompletedProcess[str]:
    """Run <runtime>/bin/serve.sh as the unit does, with server.conf holding conf."""
    if conf is not None:
        settings = render.render_server_conf(conf)
        (runtime / "config" / "server.conf").write_text(settings)
    return subprocess.run(["bash", str(runtime / "bin" / "serve.sh")], env={"PATH": os.defpath, **(env or {})},
                          capture_output=True, text=True, check=False)


def argv(runtime: Path, conf: dict[str, str] | None, env: dict[str, str] | None = None) -> list[str]:
    result = run(runtime, conf, env)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def flag(args: list[str], name: str) -> str:
    assert args.count(name) == 1, args
    return args[args.index(name) + 1]


def test_build_flags_always_present_and_no_yarn_within_native_length(host):
    args = argv(host, base_conf(host))
    assert args == ["--model", model(host), "--ctx-size", "4096", "--flash-attn", "on",
                    "--cache-type-k", "q8_0", "--cache-type-v", "q8_0",
                    "--host", "127.0.0.1", "--port", "8080", "--jinja"]


def test_no_yarn_at_exactly_the_native_length(host):
    args = argv(host, base_conf(host, SPEAR_SERVER_CTX="8192"))
    assert "--rope-scaling" not in args and "--override-kv" not in args


@pytest.mark.parametrize("ctx,native,scale", [
    ("16384", "8192", "2"),
    ("24576", "8192", "3"),
    ("12288", "8192", "1.5"),
    ("100", "3", "33.333333"),
    ("200", "3", "66.666667"),  # rounded, not cut
    ("8193", "8192", "1.000122"),
])
def test_yarn_past_the_native_length(host, ctx, native, scale):
    args = argv(host, base_conf(host, SPEAR_SERVER_CTX=ctx, SPEAR_SERVER_NATIVE_CTX=native))
    assert args[args.index("--rope-scaling"):] == [
        "--rope-scaling", "yarn", "--rope-scale", scale, "--yarn-orig-ctx", native,
        "--override-kv", f"llama.context_length=int:{ctx}"]


def test_no_native_length_means_no_yarn(host):
    args = argv(host, base_conf(host, SPEAR_SERVER_CTX="65536", SPEAR_SERVER_NATIVE_CTX=None))
    assert "--rope-scaling" not in args


def test_yarn_without_arch_is_refused(host):
    result = run(host, base_conf(host, SPEAR_SERVER_CTX="16384", SPEAR_SERVER_ARCH=None))
    assert result.returncode == 2
    assert "SPEAR_SERVER_ARCH" in result.stderr and result.stdout == ""


def test_optional_flags_in_seed_order(host):
    args = argv(host, base_conf(host, SPEAR_SERVER_PARALLEL="2", SPEAR_SERVER_NGL="99",
                                SPEAR_SERVER_THREADS="8", SPEAR_SERVER_HOST="0.0.0.0",
                                SPEAR_SERVER_PORT="9000"))
    assert args == ["--model", model(host), "--ctx-size", "4096", "--parallel", "2",
                    "--n-gpu-layers", "99", "--flash-attn", "on", "--cache-type-k", "q8_0",
                    "--cache-type-v", "q8_0", "--host", "0.0.0.0", "--port", "9000", "--jinja",
                    "--threads", "8"]


def test_lora_when_readable(host):
    adapter = str(host / "models" / "lora" / "a.gguf")
    args = argv(host, base_conf(host, SPEAR_SERVER_LORA=adapter))
    assert flag(args, "--lora") == adapter


@pytest.mark.parametrize("lora", ["none", None])
def test_no_lora_for_the_base_model(host, lora):
    assert "--lora" not in argv(host, base_conf(host, SPEAR_SERVER_LORA=lora))


def test_unreadable_adapter_serves_the_base_model_saying_so(host):
    missing = str(host / "models" / "lora" / "gone.gguf")
    result = run(host, base_conf(host, SPEAR_SERVER_LORA=missing))
    assert result.returncode == 0
    assert "--lora" not in result.stdout.splitlines()
    assert f"serve.sh: adapter not readable: {missing}; serving the base model" in result.stderr


@pytest.mark.parametrize("which", ["missing", "directory"])
def test_unreadable_model_refuses_to_start_naming_the_path(host, which):
    # Tests run as root, for whom mode bits do not make a file unreadable: use a missing file
    # and a directory instead.
    path = host / "models" / "gguf" / ("gone.gguf" if which == "missing" else "")
    result = run(host, base_conf(host, SPEAR_SERVER_MODEL=str(path)))
    assert result.returncode != 0
    assert f"serve.sh: model not readable: {path}" in result.stderr
    assert result.stdout == ""  # llama-server never ran


@pytest.mark.parametrize("ctx", [None, ""])
def test_missing_context_size_is_refused(host, ctx):
    result = run(host, base_conf(host, SPEAR_SERVER_CTX=ctx))
    assert result.returncode == 2
    assert "SPEAR_SERVER_CTX" in result.stderr and result.stdout == ""


def test_missing_model_is_refused(host):
    result = run(host, base_conf(host, SPEAR_SERVER_MODEL=None))
    assert result.returncode == 2 and "SPEAR_SERVER_MODEL" in result.stderr


@pytest.mark.parametrize("key,value", [("SPEAR_SERVER_CTX", "abc"), ("SPEAR_SERVER_PORT", "80a"),
                                       ("SPEAR_SERVER_THREADS", "0"), ("SPEAR_SERVER_MOE", "yes"),
                                       ("SPEAR_SERVER_ARCH", "Qwen-3")])
def test_malformed_value_is_refused_naming_the_key(host, key, value):
    result = run(host, base_conf(host, **{key: value}))
    assert result.returncode == 2 and key in result.stderr and result.stdout == ""


def test_environment_wins_over_the_file(host):
    args = argv(host, base_conf(host, SPEAR_SERVER_PORT="8010"),
                env={"SPEAR_SERVER_CTX": "2048", "SPEAR_SERVER_PORT": "9999", "SPEAR_SERVER_THREADS": ""})
    assert flag(args, "--ctx-size") == "2048"
    assert flag(args, "--port") == "9999"
    assert "--threads" not in args  # an empty value does not count as set


def test_environment_alone_without_a_file(host):
    result = run(host, None, env={"SPEAR_SERVER_MODEL": model(host), "SPEAR_SERVER_CTX": "1024"})
    assert result.returncode == 0
    assert flag(result.stdout.splitlines(), "--ctx-size") == "1024"
    assert "no " in result.stderr and "server.conf" in result.stderr


def test_port_and_host_fallbacks(host):
    args = argv(host, base_conf(host))
    assert flag(args, "--port") == "8080" and flag(args, "--host") == "127.0.0.1"


@pytest.mark.parametrize("ncpumoe,expected", [
    (None, ["--cpu-moe"]),  # unset: the build's default, every expert on the CPU
    ("0", []),  # everything on the card
    ("20", ["--n-cpu-moe", "20"]),
])
def test_moe_offload(host, ncpumoe, expected):
    args = argv(host, base_conf(host, SPEAR_SERVER_MOE="1", SPEAR_SERVER_NCPUMOE=ncpumoe,
                                SPEAR_SERVER_LORA=str(host / "models" / "lora" / "a.gguf")))
    tail = args[args.index("--jinja") + 1:]
    assert tail == [*expected, "--lora", str(host / "models" / "lora" / "a.gguf")]


def test_no_moe_offload_on_a_dense_model(host):
    result = run(host, base_conf(host, SPEAR_SERVER_MOE="0", SPEAR_SERVER_NCPUMOE="20"))
    args = result.stdout.splitlines()
    assert "--n-cpu-moe" not in args and "--cpu-moe" not in args
    assert "SPEAR_SERVER_NCPUMOE=20 ignored" in result.stderr


def test_default_binary_and_config_are_under_the_runtime_folder(host):
    result = run(host, base_conf(host), env={"SPEAR_SERVE_PRINT": "1"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == str(host / "current" / "bin" / "llama-server")


def test_print_mode_matches_what_is_executed_and_skips_file_checks(host):
    conf = base_conf(host, SPEAR_SERVER_CTX="16384", SPEAR_SERVER_MOE="1",
                     SPEAR_SERVER_LORA=str(host / "models" / "lora" / "a.gguf"))
    executed = argv(host, conf)
    printed = argv(host, conf, env={"SPEAR_SERVE_PRINT": "1"})
    assert printed[1:] == executed
    gone = base_conf(host, SPEAR_SERVER_MODEL="/nowhere/m.gguf", SPEAR_SERVER_LORA="/nowhere/a.gguf")
    printed = argv(host, gone, env={"SPEAR_SERVE_PRINT": "1"})
    assert flag(printed, "--model") == "/nowhere/m.gguf" and flag(printed, "--lora") == "/nowhere/a.gguf"


def test_stand_in_binary_from_environment(host, tmp_path):
    other = tmp_path / "other-server"
    other.write_text("#!/bin/sh\necho other \"$@\"\n")
    other.chmod(0o755)
    result = run(host, base_conf(host), env={"SPEAR_LLAMA_SERVER": str(other)})
    assert result.stdout.startswith("other --model ")


def test_script_holds_no_deployment_values():
    text = SERVE_SH.read_text()
    for value in ("524288", "262144", "8010", "qwen3next", "Qwen3", ".gguf", "/opt/spear"):
        assert value not in text


def test_the_launchers_and_set_up_scripts_are_shellcheck_clean():
    # scripts/setup.sh installs shellcheck, so a missing one fails here rather than skipping.
    assert shutil.which("shellcheck"), "shellcheck is not installed: run scripts/setup.sh"
    subprocess.run(["shellcheck", "-x", "serve.sh", "server.conf.example"], cwd=SERVE_SH.parent,
                   check=True)
    scripts = sorted(str(p.relative_to(REPO)) for p in [*REPO.glob("hosts/*/*.sh"),
                                                         *REPO.glob("scripts/*.sh"),
                                                         REPO / "scripts" / "up-local",
                                                         REPO / "scripts" / "test",
                                                         REPO / "scripts" / "rollback"])
    subprocess.run(["shellcheck", "-x", *scripts], cwd=REPO, check=True)


def flag_pairs(argv: list[str]) -> list[tuple[str, str | None]]:
    """argv after the program as (flag, value or None) pairs."""
    flags, rest = [], argv[1:]
    while rest:
        name, *rest = rest
        value = rest.pop(0) if rest and not rest[0].startswith("--") else None
        flags.append((name, value))
    return flags


def test_prod_stack_renders_exactly_the_seed_command_line():
    args = render.command_line(render.render_server_conf(render.server_conf_settings(stack_host("prod"))))
    assert args[0] == "llama-server"
    got, want = flag_pairs(args), flag_pairs(SEED_COMMAND_LINE)
    for position, (flag, seed_flag) in enumerate(zip(got, want)):
        assert flag == seed_flag, f"flag {position}: {flag} != {seed_flag}"
    assert len(got) == len(want), got
