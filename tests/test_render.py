"""components/render.py: server.conf, the unit, and the command line read back from serve.sh."""

from __future__ import annotations

import configparser
import re
import subprocess
from pathlib import Path

import pytest
import yaml

import stack_config
from components import render

REPO = Path(__file__).resolve().parent.parent
DUMMY_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\n-----END OPENSSH PRIVATE KEY-----\n"


def stack(name: str, **changes) -> stack_config.FleetConfig:
    config = yaml.safe_load((REPO / "stacks" / f"Pulumi.{name}.yaml").read_text())["config"]
    raw = {key.split(":", 1)[1]: value for key, value in config.items()}
    if "sshPrivateKeyPath" not in raw:
        raw["sshPrivateKey"] = DUMMY_KEY
    for section, values in changes.items():
        raw[section] = {**raw[section], **values}
    return stack_config.parse(raw)


def test_prod_settings():
    assert render.server_conf_settings(stack("prod")) == {
        "SPEAR_SERVER_MODEL": "/opt/spear/models/gguf/Qwen3-Coder-Next-Q8_0-00001-of-00004.gguf",
        "SPEAR_SERVER_LORA": "none",
        "SPEAR_SERVER_CTX": "524288",
        "SPEAR_SERVER_NATIVE_CTX": "262144",
        "SPEAR_SERVER_ARCH": "qwen3next",
        "SPEAR_SERVER_HOST": "127.0.0.1",
        "SPEAR_SERVER_PORT": "8010",
        "SPEAR_SERVER_THREADS": "16",
        "SPEAR_SERVER_NGL": "99",
        "SPEAR_SERVER_NCPUMOE": "0",
        "SPEAR_SERVER_MOE": "1",
        "SPEAR_SERVER_PARALLEL": "1",
    }


def test_unset_optional_values_are_left_out():
    settings = render.server_conf_settings(stack("local"))
    assert "SPEAR_SERVER_NGL" not in settings and "SPEAR_SERVER_NCPUMOE" not in settings
    assert settings["SPEAR_SERVER_THREADS"] == "2"
    assert settings["SPEAR_SERVER_MOE"] == "0"


def test_adapter_and_runtime_folder():
    cfg = stack("prod", model={"adapter": "coder.gguf"}, inferenceHost={"runtimeDir": "/srv/spear/"})
    settings = render.server_conf_settings(cfg)
    assert settings["SPEAR_SERVER_LORA"] == "/srv/spear/models/lora/coder.gguf"
    assert settings["SPEAR_SERVER_MODEL"].startswith("/srv/spear/models/gguf/")


def test_server_conf_text():
    text = render.render_server_conf(render.server_conf_settings(stack("prod")))
    header = [line for line in text.splitlines() if line.startswith("#")]
    assert "spear-fleet" in header[0] and "do not edit" in header[0]
    assert any("pulumi refresh" in line for line in header)
    body = [line for line in text.splitlines() if not line.startswith("#")]
    assert body[0] == "SPEAR_SERVER_MODEL=/opt/spear/models/gguf/Qwen3-Coder-Next-Q8_0-00001-of-00004.gguf"
    assert "SPEAR_SERVER_CTX=524288" in body
    assert text.endswith("\n")


def test_server_conf_is_sourced_back_to_the_same_values(tmp_path):
    settings = {"SPEAR_SERVER_MODEL": "/a b/it's.gguf", "SPEAR_SERVER_CTX": "$(reboot)"}
    conf = tmp_path / "server.conf"
    conf.write_text(render.render_server_conf(settings))
    out = subprocess.run(["bash", "-c", 'source "$1"; printf "%s\\n" "$SPEAR_SERVER_MODEL" "$SPEAR_SERVER_CTX"',
                          "-", str(conf)], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["/a b/it's.gguf", "$(reboot)"]


def test_server_conf_refuses_keys_that_are_not_shell_names():
    with pytest.raises(ValueError, match="shell variable names"):
        render.render_server_conf({"SPEAR SERVER": "x"})


def test_every_key_is_documented_and_read_by_serve_sh():
    cfg = stack("dev", model={"adapter": "a.gguf"})
    rendered = set(render.server_conf_settings(cfg))
    example = (REPO / "hosts" / "inference" / "server.conf.example").read_text()
    documented = set(re.findall(r"^(SPEAR_SERVER_[A-Z_]+)=", example, re.MULTILINE))
    serve_keys = re.search(r"^keys=\(([^)]*)\)", render.SERVE_SH.read_text(), re.MULTILINE).group(1)
    read = {f"SPEAR_SERVER_{key}" for key in serve_keys.split()}
    assert rendered == documented == read


@pytest.mark.parametrize("runtime", ["/opt/spear", "/srv/spear-test"])
def test_unit(runtime):
    text = render.render_unit(runtime)
    unit = configparser.ConfigParser(comment_prefixes=("#",), strict=True, interpolation=None)
    unit.optionxform = str  # systemd keys are case-sensitive
    unit.read_string(text)
    assert unit.sections() == ["Unit", "Service", "Install"]
    assert unit["Unit"]["After"] == "network-online.target"
    assert unit["Unit"]["Description"]
    service = unit["Service"]
    assert service["Type"] == "simple"
    assert service["Slice"] == "system.slice"
    assert service["ExecStart"] == f"{runtime}/bin/serve.sh"
    assert service["WorkingDirectory"] == runtime
    assert service["Restart"] == "on-failure"
    assert service["RestartSec"] == "5"
    assert unit["Install"]["WantedBy"] == "multi-user.target"
    # Nothing that hides /dev/nvidia*, and no settings beside server.conf.
    for key in ("PrivateDevices", "DevicePolicy", "DeviceAllow", "EnvironmentFile"):
        assert key not in service
    assert "$" not in text
    assert "generated by spear-fleet" in text.splitlines()[0]


def test_command_line_for_dev_offloads_experts_without_yarn():
    args = render.command_line(render.render_server_conf(render.server_conf_settings(stack("dev"))))
    assert args[args.index("--n-cpu-moe") + 1] == "40"
    assert "--rope-scaling" not in args and "--override-kv" not in args


def test_command_line_for_local_uses_yarn_on_the_tiny_model():
    args = render.command_line(render.render_server_conf(render.server_conf_settings(stack("local"))))
    assert args[args.index("--rope-scale") + 1] == "2"
    assert args[args.index("--override-kv") + 1] == "llama.context_length=int:512"
    assert "--n-gpu-layers" not in args and "--cpu-moe" not in args


def test_command_line_reports_what_serve_sh_refuses():
    settings = render.server_conf_settings(stack("prod"))
    del settings["SPEAR_SERVER_CTX"]
    with pytest.raises(render.ServeScriptError, match="SPEAR_SERVER_CTX"):
        render.command_line(render.render_server_conf(settings))


def test_command_line_ignores_this_machines_environment(monkeypatch):
    monkeypatch.setenv("SPEAR_SERVER_PORT", "9999")
    monkeypatch.setenv("SPEAR_LLAMA_SERVER", "/elsewhere/llama-server")
    args = render.command_line(render.render_server_conf(render.server_conf_settings(stack("prod"))))
    assert args[0] == "llama-server"
    assert args[args.index("--port") + 1] == "8010"
