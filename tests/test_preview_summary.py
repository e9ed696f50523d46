"""The preview summary: unit tests on small hand-written steps for each class, and integration
tests on real `pulumi preview --json` output of the real engine for prod: unchanged, a new
model, a new context size and a llama.cpp commit bump."""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml

from policies.tests.pack_runs import PackPreview, preview_with_pack
from scripts import preview_summary
from scripts.preview_summary import summarize
from tests.engine import Project, repo_stack

URN = "urn:pulumi:prod::spear-fleet::spear:fleet:InferenceHost$pulumi-python:dynamic:Resource::"
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
        return None if inputs is None else {"custom": True, "type": "pulumi-python:dynamic:Resource",
                                            "inputs": {"connection": CONNECTION, **inputs}}
    return {"op": op, "urn": URN + name, "oldState": state(old), "newState": state(new), **extra}


def conf(**settings: str) -> dict[str, Any]:
    values = {"SPEAR_SERVER_MODEL": Q8_MODEL, "SPEAR_SERVER_CTX": "524288", **settings}
    return {"spear_kind": "server-conf", "settings": values,
            "content": "".join(f"{k}={v}\n" for k, v in values.items())}


def build(commit: str, key: str) -> dict[str, Any]:
    return {"spear_kind": "llama-server-build", "build_key": key, "cmake_flags": ["-DGGML_CUDA=ON"],
            "source": {"git": "https://github.com/ggml-org/llama.cpp.git", "commit": commit}}


def unit(**triggers: str) -> dict[str, Any]:
    return {"spear_kind": "systemd-unit", "unit": "spear-inference.service",
            "restart_triggers": {"build_key": "b1", "model": "m1", "server_conf": "c1",
                                 "launcher": "l1", **triggers}}


def model(*names: str) -> dict[str, Any]:
    return {"spear_kind": "model-files", "digest": hashlib.sha256(repr(names).encode()).hexdigest(),
            "shards": [{"name": n, "size": 1, "sha256": "0" * 64} for n in names]}


def summary_of(*steps: dict[str, Any], events: list | None = None) -> str:
    text = summarize({"steps": list(steps)}, events)
    assert "PRIVATE KEY" not in text and "c2VjcmV0" not in text and "connection" not in text
    return text


def test_unchanged_parts_read_as_no_changes():
    text = summary_of(step("same", "inference-server-conf", conf(), conf()),
                      step("same", "inference-unit", unit(), unit()))
    assert text.startswith("### `prod`: no changes\n")
    assert "- No change: server.conf (`inference-server-conf`), spear-inference.service" in text


def test_a_new_context_size_is_config_only_with_the_setting_old_to_new():
    text = summary_of(step("update", "inference-server-conf", conf(), conf(SPEAR_SERVER_CTX="262144")),
                      step("update", "inference-unit", unit(), unit(server_conf="c2")))
    assert text.startswith("### `prod`: restart, no rebuild\n")
    assert "- **server.conf** (`inference-server-conf`): **config only (restart)**" in text
    assert "  - `SPEAR_SERVER_CTX`: `524288` → `262144`\n" in text
    assert "**spear-inference.service** (`inference-unit`): **config only (restart)**" in text
    assert "  - restarts: server_conf changed\n" in text


def test_a_new_commit_is_a_rebuild_with_the_commit_old_to_new():
    text = summary_of(step("replace", "inference-llama-server", build(OLD_COMMIT, "b1"),
                           build(NEW_COMMIT, "b2"), replaceReasons=["build_key"]),
                      step("update", "inference-unit", unit(), unit(build_key="b2")))
    assert text.startswith("### `prod`: rebuild and restart\n")
    assert "- **llama-server build** (`inference-llama-server`): **rebuild**" in text
    assert "  - replaced because build_key changed\n" in text
    assert f"  - `commit`: `{OLD_COMMIT}` → `{NEW_COMMIT}`\n" in text
    assert "  - restarts: build_key changed\n" in text


def test_a_new_manifest_is_a_model_refetch_naming_the_shards():
    text = summary_of(step("update", "inference-model", model("a.gguf", "b.gguf"),
                           model("a.gguf", "c.gguf")),
                      step("update", "inference-unit", unit(), unit(model="m2")))
    assert text.startswith("### `prod`: restart, no rebuild (after a model re-fetch)\n")
    assert "- **model files** (`inference-model`): **model re-fetch**" in text
    assert "  - shard removed: `b.gguf`\n  - shard added: `c.gguf`\n" in text
    assert "  - restarts: model changed\n" in text


def test_a_check_that_only_runs_again_restarts_nothing():
    text = summary_of(step("update", "inference-smoke-test", {"spear_kind": "smoke-test", "model": "a"},
                           {"spear_kind": "smoke-test", "model": "b"}))
    assert text.startswith("### `prod`: in place, no restart\n")
    assert "  - `model` changed\n" in text


def test_other_replacements_creates_and_deletes():
    moved = conf()
    text = summary_of(step("replace", "inference-server-conf", conf(), {**moved, "path": "/srv/x"},
                           replaceReasons=["path"]),
                      step("create", "inference-smoke-test", None, {"spear_kind": "smoke-test"}),
                      step("delete", "inference-serve-sh", {"spear_kind": "launcher"}, None))
    assert text.startswith("### `prod`: delete\n")
    assert "- **serve.sh** (`inference-serve-sh`): **delete**: removed from the host." in text
    assert "- **server.conf** (`inference-server-conf`): **replace**" in text
    assert "  - replaced because path changed\n" in text
    assert "- **smoke test** (`inference-smoke-test`): **create**: new on the host." in text


def test_a_changed_connection_is_never_shown():
    moved = {**CONNECTION, "host": "reds2.internal", "private_key": KEY.replace("c2VjcmV0", "bmV3")}
    text = summary_of(step("update", "inference-server-conf", conf(), {**conf(), "connection": moved}))
    assert "reds2" not in text and "bmV3" not in text


def test_policy_results_follow_the_changes():
    events = [
        {"policyAnalyzeSummaryEvent": {"resourceUrn": URN + "inference-server-conf",
                                       "policyPackName": "spear-fleet", "policyPackVersion": "0.1.0",
                                       "passed": ["jinja-enabled"], "failed": ["kv-cache-and-slots"]}},
        {"policyEvent": {"resourceUrn": URN + "inference-server-conf", "policyName": "kv-cache-and-slots",
                         "policyPackName": "spear-fleet", "policyPackVersion": "0.1.0",
                         "enforcementLevel": "advisory",
                         "message": "The KV cache type...\nseed 000 §6.2.2: --parallel 4.\n"}},
    ]
    text = summary_of(step("same", "inference-server-conf", conf(), conf()), events=events)
    assert "Policy pack spear-fleet 0.1.0: **passed**; 1 advisory; 1 rule(s) passed everywhere" in text
    assert ("- ⚠️ `kv-cache-and-slots` (advisory) on server.conf (`inference-server-conf`):"
            " seed 000 §6.2.2: --parallel 4.") in text
    assert "Not run" in summary_of(step("same", "inference-server-conf", conf(), conf()))


def test_the_command_reads_a_file_or_stdin(tmp_path, capsys, monkeypatch):
    preview = tmp_path / "preview.json"
    preview.write_text(json.dumps({"steps": [step("same", "inference-unit", unit(), unit())]}))
    events = tmp_path / "events.jsonl"
    events.write_text(json.dumps({"policyAnalyzeStackSummaryEvent": {
        "policyPackName": "spear-fleet", "policyPackVersion": "0.1.0", "passed": ["ports-distinct"]}}) + "\n")
    assert preview_summary.main([str(preview), "--policy-events", str(events)]) == 0
    assert "no changes" in capsys.readouterr().out
    monkeypatch.setattr("sys.stdin", preview.open())
    assert preview_summary.main([]) == 0
    assert "Not run (no event log given)." in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------
# Integration: real previews of prod by the real engine, against a deployed prod.

# A real `pulumi up` needs the prod hosts. This one runs the real program on the real engine
# with each host resource's create answered by a stand-in that touches no host and returns
# what the resource's apply() would learn there (the outputs each component declares). It is
# appended to the copy's components/host_resource.py for that one `up` (the dynamic provider
# process imports the copy) and removed afterwards, so every preview below runs the real
# providers' diffs against that state. A real-host `up` can replace `deployed_prod` as it is.
STAND_IN_OUTPUTS = {
    "llama-server-build": {"bin_dir": "/opt/spear/builds/stand-in/bin", "version": "stand-in",
                           "reused": False},
    "model-files": {"model_path": Q8_MODEL, "fetched": []},
    "launcher": {"digest": "stand-in"},
    "server-conf": {"digest": "stand-in"},
    "systemd-unit": {"main_pid": 1, "cgroup": "0::/system.slice/spear-inference.service",
                     "started_at": 1.0, "active_state": "active"},
    "smoke-test": {"stop_reason": "end_turn", "text": "SPEAR-BACKEND-OK", "tool_calls": [],
                   "summary": "end_turn | SPEAR-BACKEND-OK | ()"},
}
HOST_STAND_IN = f'''

# Stand-in for a deployed host (tests/test_preview_summary.py): create touches no host.
def _stand_in_create(self, props):
    return CreateResult(id_=self.resource_id(props),
                        outs={{**props, **{STAND_IN_OUTPUTS!r}[props["spear_kind"]]}})


HostProvider.create = _stand_in_create
'''


@pytest.fixture(scope="module")
def deployed_prod(tmp_path_factory) -> Project:
    """The committed prod stack, with the state a successful `pulumi up` of it leaves."""
    project = repo_stack(tmp_path_factory.mktemp("summary"), "prod")
    module = project.dir / "components" / "host_resource.py"
    real = module.read_text()
    module.write_text(real + HOST_STAND_IN)
    try:
        project.pulumi("up", "--stack", "prod", "--yes", "--skip-preview")
    finally:
        module.write_text(real)
    return project


@contextlib.contextmanager
def stack_changed(project: Project, change: Callable[[dict[str, Any]], None]) -> Iterator[None]:
    """prod's config with `change` applied to it (keys without the project prefix), then restored."""
    path = project.dir / "stacks" / "Pulumi.prod.yaml"
    committed = path.read_text()
    doc = yaml.safe_load(committed)
    config = {key.split(":", 1)[1]: value for key, value in doc["config"].items()}
    change(config)
    doc["config"] = {f"spear-fleet:{key}": value for key, value in config.items()}
    path.write_text(yaml.safe_dump(doc))
    try:
        yield
    finally:
        path.write_text(committed)


def summarized(project: Project) -> tuple[PackPreview, str]:
    run = preview_with_pack(project, "prod", "--show-sames")
    assert run.ok, run.output[-4000:]
    return run, summarize(run.preview, run.events)


@pytest.mark.integration
def test_unchanged_prod_reads_as_no_changes(deployed_prod):
    run, text = summarized(deployed_prod)
    assert run.preview["changeSummary"] == {"same": 8}
    assert text.startswith("### `prod`: no changes\n")
    for part in ("llama-server build", "model files", "serve.sh", "server.conf",
                 "spear-inference.service", "smoke test"):
        assert part in text.split("- No change: ")[1]
    assert "Policy pack spear-fleet 0.1.0: **passed**; 0 advisory; 9 rule(s) passed" in text


@pytest.mark.integration
def test_a_new_model_in_prod_reads_as_restart(deployed_prod):
    def new_model(config):
        config["model"]["shards"] = [
            {"name": f"Qwen3-Coder-Next-Q6_K-0000{i}-of-00003.gguf", "size": 21_000_000_000 + i,
             "sha256": hashlib.sha256(f"Q6_K shard {i}".encode()).hexdigest()} for i in (1, 2, 3)]

    with stack_changed(deployed_prod, new_model):
        _, text = summarized(deployed_prod)
    assert text.startswith("### `prod`: restart, no rebuild (after a model re-fetch)\n")
    assert "- **model files** (`inference-model`): **model re-fetch**" in text
    assert "  - shard removed: `Qwen3-Coder-Next-Q8_0-00004-of-00004.gguf`\n" in text
    assert "  - shard added: `Qwen3-Coder-Next-Q6_K-00003-of-00003.gguf`\n" in text
    assert "- **server.conf** (`inference-server-conf`): **config only (restart)**" in text
    assert (f"  - `SPEAR_SERVER_MODEL`: `{Q8_MODEL}` →"
            " `/opt/spear/models/gguf/Qwen3-Coder-Next-Q6_K-00001-of-00003.gguf`\n") in text
    assert "  - restarts: model, server_conf changed\n" in text
    assert "llama-server build (`inference-llama-server`)" in text.split("- No change: ")[1]
    assert "rebuild**" not in text


@pytest.mark.integration
def test_a_new_context_size_in_prod_reads_as_config_only(deployed_prod):
    def smaller_window(config):
        config["server"]["ctxSize"] = 262144

    with stack_changed(deployed_prod, smaller_window):
        _, text = summarized(deployed_prod)
    assert text.startswith("### `prod`: restart, no rebuild\n")
    assert "  - `SPEAR_SERVER_CTX`: `524288` → `262144`\n" in text
    assert "  - restarts: server_conf changed\n" in text


@pytest.mark.integration
def test_a_llama_cpp_commit_bump_reads_as_rebuild(deployed_prod):
    def bump(config):
        config["llamaCpp"]["source"]["commit"] = NEW_COMMIT

    with stack_changed(deployed_prod, bump):
        _, text = summarized(deployed_prod)
    assert "connection" not in text and "[secret]" not in text
    assert text.startswith("### `prod`: rebuild and restart\n")
    assert "- **llama-server build** (`inference-llama-server`): **rebuild**" in text
    assert f"  - `commit`: `{OLD_COMMIT}` → `{NEW_COMMIT}`\n" in text
    assert "  - restarts: build_key changed\n" in text
    assert "model files (`inference-model`)" in text.split("- No change: ")[1]
