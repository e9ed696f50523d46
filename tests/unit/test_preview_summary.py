"""The preview summary on small hand-written steps for each class (tests/integration has the
same on real previews of the real engine)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from components.inference_host.llama_server_build import LlamaServerBuildProvider, build_key
from review.kinds import UNKNOWN
from review.summary import summarize
from scripts.preview_summary import main as preview_summary_main
from spear import tokens

# The inference host's parts by the suffix of their resource name, as the component names them.
PART_TYPES = {"-server-conf": tokens.SERVER_CONF, "-unit": tokens.SYSTEMD_UNIT,
              "-llama-server": tokens.LLAMA_SERVER_BUILD, "-model": tokens.MODEL_FILES,
              "-smoke-test": tokens.SMOKE_TEST, "-serve-sh": tokens.LAUNCHER}


def urn(name: str) -> str:
    token = next(t for suffix, t in PART_TYPES.items() if name.endswith(suffix))
    return f"urn:pulumi:prod::spear-fleet::{tokens.INFERENCE_HOST}${token.type}::{name}"

KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nc2VjcmV0\n-----END OPENSSH PRIVATE KEY-----\n"
CONNECTION = {"host": "reds.internal", "port": 22, "user": "root", "private_key": KEY}
OLD_COMMIT = "aa6192d38defc9a5d9fb2987413f71b18f214270"
NEW_COMMIT = "0123456789abcdef0123456789abcdef01234567"
Q8_MODEL = "/opt/spear/models/gguf/Qwen3-Coder-Next-Q8_0-00001-of-00004.gguf"


# ---------------------------------------------------------------------------------------------
# Unit tests: hand-written steps shaped like the engine's (op, urn, oldState/newState inputs,
# replaceReasons), each with the secret connection in plain text, as `--show-secrets` gives it.


def step(op: str, name: str, old: dict | None = None, new: dict | None = None,
         **extra: Any) -> dict[str, Any]:
    def state(inputs):
        return None if inputs is None else {"custom": True, "type": urn(name).split("$")[-1].split("::")[0],
                                            "inputs": {"connection": CONNECTION, **inputs}}
    return {"op": op, "urn": urn(name), "oldState": state(old), "newState": state(new), **extra}


def conf(**settings: str) -> dict[str, Any]:
    values = {"SPEAR_SERVER_MODEL": Q8_MODEL, "SPEAR_SERVER_CTX": "524288", **settings}
    return {"settings": values,
            "content": "".join(f"{k}={v}\n" for k, v in values.items())}


def build(commit: str, key: str) -> dict[str, Any]:
    return {"build_key": key, "cmake_flags": ["-DGGML_CUDA=ON"],
            "source": {"git": "https://github.com/ggml-org/llama.cpp.git", "commit": commit}}


def unit(**triggers: str) -> dict[str, Any]:
    return {"unit": "spear-inference.service",
            "restart_triggers": {"build_key": "b1", "model": "m1", "server_conf": "c1",
                                 "launcher": "l1", **triggers}}


def model(*names: str) -> dict[str, Any]:
    return {"digest": hashlib.sha256(repr(names).encode()).hexdigest(),
            "shards": [{"name": n, "size": 1, "sha256": "0" * 64} for n in names]}


def summary_of(*steps: dict[str, Any], events: list | None = None) -> str:
    text = summarize({"steps": list(steps)}, events)
    assert "PRIVATE KEY" not in text and "c2VjcmV0" not in text and "connection" not in text
    return text


def test_unchanged_parts_read_as_no_changes():
    text = summary_of(step("same", "reds-server-conf", conf(), conf()),
                      step("same", "reds-unit", unit(), unit()))
    assert text.startswith("### `prod`: no changes\n")
    assert "- No change: server.conf (`reds-server-conf`), spear-inference.service" in text


def test_a_new_context_size_is_config_only_with_the_setting_old_to_new():
    text = summary_of(step("update", "reds-server-conf", conf(), conf(SPEAR_SERVER_CTX="262144")),
                      step("update", "reds-unit", unit(), unit(server_conf="c2")))
    assert text.startswith("### `prod`: restart, no rebuild\n")
    assert "- **server.conf** (`reds-server-conf`): **config only (restart)**" in text
    assert "  - `SPEAR_SERVER_CTX`: `524288` → `262144`\n" in text
    assert "**spear-inference.service** (`reds-unit`): **config only (restart)**" in text
    assert "  - restarts: server_conf changed\n" in text


def test_a_new_commit_is_a_rebuild_with_the_commit_old_to_new():
    text = summary_of(step("replace", "reds-llama-server", build(OLD_COMMIT, "b1"),
                           build(NEW_COMMIT, "b2"), replaceReasons=["build_key"]),
                      step("update", "reds-unit", unit(), unit(build_key="b2")))
    assert text.startswith("### `prod`: rebuild and restart\n")
    assert "- **llama-server build** (`reds-llama-server`): **rebuild**" in text
    assert "  - replaced because build_key changed\n" in text
    assert f"  - `commit`: `{OLD_COMMIT}` → `{NEW_COMMIT}`\n" in text
    assert "  - restarts: build_key changed\n" in text


def built_with(script: str) -> dict[str, Any]:
    """A build's inputs, as the component gives them, with `script` as build-llama-server.sh."""
    inputs = build(OLD_COMMIT, "")
    return {**inputs, "build_script": script,
            "build_key": build_key(inputs["source"], inputs["cmake_flags"], script)}


def test_an_edited_build_script_is_a_rebuild():
    old, new = built_with("cmake --build build\n"), built_with("cmake --build build -j 2\n")
    # The step the engine makes of the provider's diff.
    diff = LlamaServerBuildProvider().diff("id", old, new)
    op = "replace" if diff.replaces else "update" if diff.changes else "same"
    text = summary_of(step(op, "reds-llama-server", old, new, replaceReasons=diff.replaces),
                      step("update", "reds-unit", unit(), unit(build_key=new["build_key"])))
    assert text.startswith("### `prod`: rebuild and restart\n")
    assert "- **llama-server build** (`reds-llama-server`): **rebuild**" in text
    assert "  - build-llama-server.sh changed\n" in text
    assert "  - restarts: build_key changed\n" in text


def test_a_new_manifest_is_a_model_refetch_naming_the_shards():
    text = summary_of(step("update", "reds-model", model("a.gguf", "b.gguf"),
                           model("a.gguf", "c.gguf")),
                      step("update", "reds-unit", unit(), unit(model="m2")))
    assert text.startswith("### `prod`: restart, no rebuild (after a model re-fetch)\n")
    assert "- **model files** (`reds-model`): **model re-fetch**" in text
    assert "  - shard removed: `b.gguf`\n  - shard added: `c.gguf`\n" in text
    assert "  - restarts: model changed\n" in text


def test_a_check_that_only_runs_again_restarts_nothing():
    text = summary_of(step("update", "reds-smoke-test", {"model": "a"},
                           {"model": "b"}))
    assert text.startswith("### `prod`: in place, no restart\n")
    assert "  - `model` changed\n" in text


def test_other_replacements_creates_and_deletes():
    moved = conf()
    text = summary_of(step("replace", "reds-server-conf", conf(), {**moved, "path": "/srv/x"},
                           replaceReasons=["path"]),
                      step("create", "reds-smoke-test", None, {}),
                      step("delete", "reds-serve-sh", {}, None))
    assert text.startswith("### `prod`: delete\n")
    assert "- **serve.sh** (`reds-serve-sh`): **delete**: removed from the host." in text
    assert "- **server.conf** (`reds-server-conf`): **replace**" in text
    assert "  - replaced because path changed\n" in text
    assert "- **smoke test** (`reds-smoke-test`): **create**: new on the host." in text


def test_a_changed_connection_is_never_shown():
    moved = {**CONNECTION, "host": "reds2.internal", "private_key": KEY.replace("c2VjcmV0", "bmV3")}
    text = summary_of(step("update", "reds-server-conf", conf(), {**conf(), "connection": moved}))
    assert "reds2" not in text and "bmV3" not in text


def test_a_new_host_key_alone_is_a_new_way_in_that_sends_nothing_and_restarts_nothing():
    old_reach = "root@reds.internal:22 host key ssh-ed25519 SHA256:old"
    new_reach = UNKNOWN
    text = summary_of(step("update", "reds-server-conf", {**conf(), "reach": old_reach},
                           {**conf(), "reach": new_reach}),
                      step("update", "inference-unit", {**unit(), "reach": old_reach},
                           {**unit(), "reach": new_reach}))
    assert text.startswith("### `prod`: in place, no restart\n"), text
    assert ("- **server.conf** (`reds-server-conf`): **new way in**: records how to reach the"
            " host from now on (refresh and destroy use it); nothing is sent to the host.") in text
    assert f"  - `reach`: `{old_reach}` → (known after the update)\n" in text


def test_policy_results_follow_the_changes():
    events = [
        {"policyAnalyzeSummaryEvent": {"resourceUrn": urn("reds-server-conf"),
                                       "policyPackName": "spear-fleet", "policyPackVersion": "0.1.0",
                                       "passed": ["jinja-enabled"], "failed": ["kv-cache-and-slots"]}},
        {"policyEvent": {"resourceUrn": urn("reds-server-conf"), "policyName": "kv-cache-and-slots",
                         "policyPackName": "spear-fleet", "policyPackVersion": "0.1.0",
                         "enforcementLevel": "advisory",
                         "message": "The KV cache type...\nseed 000 §6.2.2: --parallel 4.\n"}},
    ]
    text = summary_of(step("same", "reds-server-conf", conf(), conf()), events=events)
    assert "Policy pack spear-fleet 0.1.0: **passed**; 1 advisory; 1 rule(s) passed everywhere" in text
    assert ("- ⚠️ `kv-cache-and-slots` (advisory) on server.conf (`reds-server-conf`):"
            " seed 000 §6.2.2: --parallel 4.") in text
    assert "Not run" in summary_of(step("same", "reds-server-conf", conf(), conf()))


def test_the_command_reads_a_file_or_stdin(tmp_path, capsys, monkeypatch):
    preview = tmp_path / "preview.json"
    preview.write_text(json.dumps({"steps": [step("same", "reds-unit", unit(), unit())]}))
    events = tmp_path / "events.jsonl"
    events.write_text(json.dumps({"policyAnalyzeStackSummaryEvent": {
        "policyPackName": "spear-fleet", "policyPackVersion": "0.1.0", "passed": ["ports-distinct"]}}) + "\n")
    assert preview_summary_main([str(preview), "--policy-events", str(events)]) == 0
    assert "no changes" in capsys.readouterr().out
    monkeypatch.setattr("sys.stdin", preview.open())
    assert preview_summary_main([]) == 0
    assert "Not run (no event log given)." in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------
# The RunPod endpoint: the engine's op comes from each provider's own diff, as in a real preview.

from components.endpoints.pod_vllm import PodVllmProvider  # noqa: E402 (this section's own)
from components.endpoints.runpod_pod import RunPodPodProvider  # noqa: E402

PART_TYPES.update({"-pod": tokens.RUNPOD_POD, "-vllm": tokens.POD_VLLM})
REVISION = "da6e2ed27304dd39abadd9c82ef50e8de67bdd4c"
NEW_REVISION = "0123456789abcdef0123456789abcdef01234567"


def pod(**changes: Any) -> dict[str, Any]:
    return {"api_url": "https://rest.runpod.io/v1", "name": "spear-prod-gpu",
            "image_name": "vllm/vllm-openai:v0.24.0", "gpu_type_ids": ["NVIDIA H100 80GB HBM3"],
            "gpu_count": 2, "cloud_type": "SECURE", "container_disk_in_gb": 50, "volume_in_gb": 200,
            "ports": ["22/tcp"], "env": {"PUBLIC_KEY": "ssh-ed25519 AAAA"},
            "desired_status": "RUNNING", **changes}


def vllm_on_pod(revision: str = REVISION, pod_id: str = "xedezhzb9la3ye") -> dict[str, Any]:
    return {"pod_id": pod_id, "endpoint": {"host": "100.65.0.119", "port": 10341},
            "running": True,
            "command_line": ["vllm", "serve", "Qwen/Qwen3-Coder-Next-FP8", "--revision", revision,
                             "--enable-auto-tool-choice"]}


def diffed(provider: Any, name: str, old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The step the engine makes of the provider's diff."""
    diff = provider.diff("id", old, new)
    op = "replace" if diff.replaces else "update" if diff.changes else "same"
    return step(op, name, old, new, replaceReasons=diff.replaces)


def test_a_new_model_revision_restarts_vllm_and_keeps_the_pod():
    text = summary_of(diffed(RunPodPodProvider(), "gpu-pod", pod(), pod()),
                      diffed(PodVllmProvider(), "gpu-vllm", vllm_on_pod(), vllm_on_pod(NEW_REVISION)))
    assert text.startswith("### `prod`: restart vLLM\n")
    assert ("- **vLLM on the pod** (`gpu-vllm`): **restart vLLM**: rewrites vLLM's command line"
            " (and key file) on the pod and restarts it in tmux; the pod is kept.") in text
    assert f"  - `--revision`: `{REVISION}` → `{NEW_REVISION}`\n" in text
    assert "- No change: RunPod pod (`gpu-pod`).\n" in text


def test_a_new_gpu_type_recreates_the_pod_and_a_new_image_resets_it():
    text = summary_of(diffed(RunPodPodProvider(), "gpu-pod", pod(), pod(gpu_type_ids=["NVIDIA H200"])),
                      diffed(PodVllmProvider(), "gpu-vllm", vllm_on_pod(), vllm_on_pod(pod_id=UNKNOWN)))
    assert text.startswith("### `prod`: recreate pod\n")
    assert ("- **RunPod pod** (`gpu-pod`): **recreate pod**: a new pod is made through the RunPod"
            " API") in text
    assert "  - replaced because gpu_type_ids changed\n" in text
    text = summary_of(diffed(RunPodPodProvider(), "gpu-pod", pod(),
                             pod(image_name="vllm/vllm-openai:v0.25.0")))
    assert text.startswith("### `prod`: reset pod\n")
    assert "it restarts on a new SSH port and vLLM is started there again." in text


# ---------------------------------------------------------------------------------------------
# The REDS endpoint: a check that installs nothing, made and re-made by its provider's own diff.

from components.endpoints.reds import RedsTunnelCheckProvider  # noqa: E402 (this section's own)

PART_TYPES.update({"-check": tokens.REDS_TUNNEL_CHECK})
REDS_INPUTS = {"endpoint": "box", "ssh_host": "reds-box", "address": "127.0.0.1", "port": 8010,
               "expected_model_id": None, "managed_by": None, "triggers": {}}
SILENT = ("reds endpoint box: nothing answers on 127.0.0.1:8010 on reds-box (connection refused)."
          " Start the inference server on that host yourself")


def test_a_new_reds_endpoint_checks_the_tunnel_and_installs_nothing():
    text = summary_of(step("create", "box-check", None, REDS_INPUTS))
    assert text.startswith("### `prod`: create\n")
    assert ("- **REDS tunnel check** (`box-check`): **create**: opens the tunnel and checks that"
            " something answers: nothing is installed on a REDS host.") in text
    text = summary_of(step("delete", "box-check", REDS_INPUTS, None))
    assert "**delete**: forgotten: nothing was installed on the REDS host, so nothing is removed." in text


def test_an_endpoint_refresh_found_silent_is_a_re_check_saying_what_refresh_found():
    refreshed = {**REDS_INPUTS, "answering": False, "problem": SILENT, "model_ids": [],
                 "model_id": "qwen3-coder-next"}
    # The provider's diff of what refresh recorded against the same inputs is what the engine steps.
    assert RedsTunnelCheckProvider().diff("id", refreshed, REDS_INPUTS).changes
    checked = step("update", "box-check", REDS_INPUTS, REDS_INPUTS)
    checked["oldState"]["outputs"] = refreshed
    smoke = step("update", "box-smoke-test", {"triggers": {"checked_at": 1}},
                 {"triggers": {"checked_at": UNKNOWN}})
    # (Not summary_of: the problem rightly says "connection refused".)
    text = summarize({"steps": [checked, smoke]}, None)
    assert "PRIVATE KEY" not in text
    assert text.startswith("### `prod`: in place, no restart\n")
    assert ("- **REDS tunnel check** (`box-check`): **re-check**: re-checks the tunnel: nothing is"
            " installed on a REDS host.\n") in text
    assert f"  - refresh found: {SILENT}\n" in text
    assert "  - runs again: what it checks restarts or is checked again\n" in text


def test_a_rotated_api_key_is_named_but_its_value_never_shown():
    old = {**vllm_on_pod(), "api_key": "sk-old-SECRET-1"}
    new = {**vllm_on_pod(), "api_key": "sk-new-SECRET-2"}
    pod_text = summary_of(diffed(PodVllmProvider(), "gpu-vllm", old, new))
    rotated = summary_of(diffed(RunPodPodProvider(), "gpu-pod", {**pod(), "api_key": "rpa_OLD_SECRET"},
                                {**pod(), "api_key": "rpa_NEW_SECRET"}))
    for text in (pod_text, rotated):
        assert "SECRET" not in text


# ---------------------------------------------------------------------------------------------
# The gateway: an upgrade, a config-only restart, a new upstream and the developers' keys, each
# step made of its provider's own diff; the master key and the virtual keys are in every state
# (as `--show-secrets` gives them) and never in the summary.

import dataclasses  # noqa: E402 (this section's own)

from components.gateway.database import MIGRATE_SH, migrations_command  # noqa: E402
from components.gateway.install import LitellmInstallProvider  # noqa: E402
from components.gateway.keys import GatewayKeyProvider  # noqa: E402
from components.gateway.render import Route, render_config  # noqa: E402
from components.hostops.remote_file import RemoteFileProvider  # noqa: E402
from components.hostops.systemd_unit import SystemdUnitProvider  # noqa: E402
from config.load import parse_stack  # noqa: E402
from tests.support.config_cases import gateway_raw  # noqa: E402

PART_TYPES.update({"-litellm": tokens.LITELLM_INSTALL, "-migrations": tokens.COMMAND_REMOTE,
                   "-config": tokens.GATEWAY_CONFIG, "-service": tokens.GATEWAY_SERVICE,
                   "-tunnel-gpu": tokens.GATEWAY_TUNNEL, "-key-ana": tokens.GATEWAY_KEY,
                   "-key-bob": tokens.GATEWAY_KEY, "-key-cyn": tokens.GATEWAY_KEY})
GATEWAY = parse_stack(gateway_raw()).gateway
ROUTES = [Route.tunnel("reds", 8082, "/opt/spear/models/gguf/q.gguf", False)]
MASTER = "sk-master-SECRET-m"


def install(version: str) -> dict[str, Any]:
    return {"version": version, "install_key": f"k-{version}", "venv": "/opt/spear-gateway/venv"}


def service(**triggers: str) -> dict[str, Any]:
    return {"unit": "spear-gateway.service",
            "restart_triggers": {"install_key": "k-1.91.1", "config": "c1", "env": "e1",
                                 "hooks": "h1", **triggers}}


def config_file(gateway=GATEWAY) -> dict[str, Any]:
    return {"path": "/opt/spear-gateway/config/config.yaml", "content": render_config(gateway, ROUTES),
            "upstreams": ["reds"]}


def dev_key(developer: str, **changes: Any) -> dict[str, Any]:
    return {"developer": developer, "key_alias": developer, "models": ["coder"], "max_budget": 25.0,
            "budget_duration": "30d", "tpm_limit": None, "rpm_limit": None,
            "max_parallel_requests": None, "metadata": {"developer": developer}, "rotation": 0,
            "rotation_grace": "24h", "database": "db1", "master_key": MASTER,
            "key": f"sk-{developer}-SECRET-v", **changes}


def migrations(install_key: str) -> dict[str, Any]:
    """The migrations' Command as the program gives it (components/gateway/database.py)."""
    return {"create": migrations_command("/opt/spear-gateway", MIGRATE_SH.read_text()),
            "logging": "none", "triggers": [{"install_key": install_key, "database": "db1",
                                             "litellm_version": "1.91.1", "script": "s1"}]}


def gateway_summary(*steps: dict[str, Any]) -> str:
    text = summary_of(*steps)
    assert "SECRET" not in text
    return text


def test_a_litellm_upgrade_reads_as_reinstall_migrate_and_restart():
    text = gateway_summary(
        diffed(LitellmInstallProvider(), "gateway-litellm", install("1.91.1"), install("1.108.7")),
        step("replace", "gateway-migrations", migrations("k-1.91.1"), migrations("k-1.108.7")),
        diffed(SystemdUnitProvider(), "gateway-service", service(),
               service(install_key="k-1.108.7")))
    assert text.startswith("### `prod`: replace and restart\n")
    assert "- **LiteLLM install** (`gateway-litellm`): **replace**: a new virtualenv" in text
    assert "  - LiteLLM 1.91.1 -> 1.108.7\n" in text
    assert ("- **gateway migrations** (`gateway-migrations`): **replace**: runs migrate.sh again:"
            " applies only the LiteLLM migrations not yet recorded.") in text
    assert "  - `install_key` changed: k-1.91.1 -> k-1.108.7\n" in text
    assert "migrate.sh --venv" not in text  # the command itself is not a reviewer's line
    assert "  - restarts: install_key changed\n" in text
    assert "#### Gateway\n\n- gateway: LiteLLM 1.91.1 -> 1.108.7 (reinstall, migrate, restart)\n" in text


def test_a_config_only_change_reads_as_a_restart_naming_the_setting():
    retried = config_file(dataclasses.replace(GATEWAY, num_retries=3))
    text = gateway_summary(
        diffed(RemoteFileProvider(), "gateway-config", config_file(), retried),
        diffed(SystemdUnitProvider(), "gateway-service", service(), service(config="c2")))
    assert text.startswith("### `prod`: restart, no rebuild\n")
    assert ("- **gateway config.yaml** (`gateway-config`): **config only (restart)**: rewrites"
            " config.yaml; the proxy restarts, nothing is reinstalled.") in text
    assert "  - `router_settings.num_retries`: `2` → `3`\n" in text
    # The holds' TTL follows the retries (components/gateway/render.py hold_ttl_seconds).
    assert "  - `environment_variables.SPEAR_HOLD_TTL_SECONDS`: `2460` → `3060`\n" in text
    assert ("- gateway: config.yaml changed (environment_variables.SPEAR_HOLD_TTL_SECONDS,"
            " router_settings.num_retries): restart only\n") in text
    assert "LiteLLM" not in text.split("#### Gateway")[1]


def test_a_new_upstream_is_named_by_its_tunnel():
    tunnel = {"unit": "spear-tunnel-gpu.service", "health": {"port": 8081}}
    text = gateway_summary(step("create", "gateway-tunnel-gpu", None, tunnel),
                           diffed(SystemdUnitProvider(), "gateway-service", service(),
                                  service(config="c2")))
    assert "- gateway: new upstream gpu (spear-tunnel-gpu.service; the proxy restarts)\n" in text
    text = gateway_summary(step("delete", "gateway-tunnel-gpu", tunnel, None))
    assert "- gateway: upstream gpu removed (spear-tunnel-gpu.service stops)\n" in text


def test_key_changes_read_as_a_budget_in_place_a_new_key_and_a_revoked_one():
    text = gateway_summary(
        diffed(GatewayKeyProvider(), "gateway-key-ana", dev_key("ana"), dev_key("ana", max_budget=40.0)),
        step("create", "gateway-key-bob", None, dev_key("bob", key=None)),
        step("delete", "gateway-key-cyn", dev_key("cyn"), None))
    gateway = text.split("#### Gateway\n\n")[1].split("\n\n")[0]
    assert gateway.splitlines() == ["- ana: budget 25 -> 40 USD / 30d (in place)",
                                    "- bob: new key", "- cyn: key revoked"]
    assert ("- **developer key** (`gateway-key-cyn`): **delete**: the key is deleted (/key/delete):"
            " its developer loses access.") in text
    assert ("- **developer key** (`gateway-key-ana`): **in place (no restart)**: updated in place"
            " through /key/update: the developer keeps the key.") in text
    raised = gateway_summary(diffed(GatewayKeyProvider(), "gateway-key-ana", dev_key("ana"),
                                    dev_key("ana", max_budget=40.0)))
    assert raised.startswith("### `prod`: in place, no restart\n")  # nothing restarts


def test_a_new_budget_window_and_a_rotation_are_named_and_the_key_never_shown():
    text = gateway_summary(diffed(GatewayKeyProvider(), "gateway-key-ana", dev_key("ana"),
                                  dev_key("ana", budget_duration="1mo", rotation=1,
                                          key="sk-ana-SECRET-rotated")))
    assert ("- ana: budget 25 USD / 30d -> 25 USD / 1mo (the new window starts unspent); key"
            " rotated (the old one works for 24h) (in place)\n") in text
