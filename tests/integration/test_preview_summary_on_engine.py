"""The preview summary on real `pulumi preview --json` output of the real engine for prod,
against a deployed prod: unchanged, a new model, a new context size and a llama.cpp commit bump."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml

from policies.pack import RULES as PACK_RULES
from review.summary import summarize
from localhosts.engine import Project, repo_stack
from tests.support.pack_runs import PackPreview, preview_with_pack

# The prod stack declares the vLLM fleet: its preview needs the kubernetes plugin.
pytestmark = pytest.mark.kubernetes

Q8_MODEL = "/opt/spear/models/gguf/Qwen3-Coder-Next-Q8_0-00001-of-00004.gguf"
OLD_COMMIT = "aa6192d38defc9a5d9fb2987413f71b18f214270"
NEW_COMMIT = "0123456789abcdef0123456789abcdef01234567"

# A real `pulumi up` needs the prod hosts. This one runs the real program on the real engine
# with each host resource's create answered by a stand-in that touches no host and returns
# what the resource's apply() would learn there (the outputs each component declares). It is
# appended to the copy's components/hostops/host_resource.py for that one `up` (the dynamic provider
# process imports the copy) and removed afterwards, so every preview below runs the real
# providers' diffs against that state. A real-host `up` can replace `deployed_prod` as it is.
STAND_IN_OUTPUTS = {
    "LlamaServerBuildProvider": {"bin_dir": "/opt/spear/builds/stand-in/bin", "version": "stand-in",
                           "reused": False},
    "ModelFilesProvider": {"model_path": Q8_MODEL, "fetched": []},
    "RemoteFileProvider": {"digest": "stand-in"},
    "SystemdUnitProvider": {"main_pid": 1, "cgroup": "0::/system.slice/spear-inference.service",
                     "started_at": 1.0, "active_state": "active"},
    "EndpointVerificationProvider": {"passed": ["model-list", "completion", "tool-call"],
                                     "served_model_ids": [Q8_MODEL]},
    "SmokeTestProvider": {"stop_reason": "end_turn", "text": "SPEAR-BACKEND-OK", "tool_calls": [],
                   "summary": "end_turn | SPEAR-BACKEND-OK | ()"},
    "HostKeyProvider": {"host_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGNVbnvkJrOeCuCWYuuuT8Gyv4yNSDyEdZTjNILxnjKQ",
                        "fingerprint": "ssh-ed25519 SHA256:stand-in", "trusted": "first use"},
}
HOST_STAND_IN = f'''

# Stand-in for a deployed host (tests/integration/test_preview_summary_on_engine.py): create touches no host.
def _stand_in_create(self, props):
    return CreateResult(id_=self.resource_id(props),
                        outs={{**props, **{STAND_IN_OUTPUTS!r}[type(self).__name__]}})


HostProvider.create = _stand_in_create
'''


@pytest.fixture(scope="module")
def deployed_prod(tmp_path_factory) -> Project:
    """The committed prod stack, with the state a successful `pulumi up` of it leaves."""
    project = repo_stack(tmp_path_factory.mktemp("summary"), "prod")
    # prod's vLLM fleet needs its cluster for `up`; its summary is tested on a real cluster in
    # test_vllm_fleet_on_kubernetes.py. Here it is left out.
    for key in ("vllmFleet", "kubeconfig"):
        project.pulumi("config", "rm", "--stack", "prod", f"spear-fleet:{key}")
    # Deployed as a team deploys it: under a passphrase of its own, not the example's.
    project.own_passphrase("prod", "summary-test-passphrase")
    module = project.dir / "components" / "hostops" / "host_resource.py"
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


def test_unchanged_prod_reads_as_no_changes(deployed_prod):
    run, text = summarized(deployed_prod)
    assert run.preview["changeSummary"] == {"same": 10}
    assert text.startswith("### `prod`: no changes\n")
    for part in ("llama-server build", "model files", "serve.sh", "server.conf",
                 "spear-inference.service", "smoke test"):
        assert part in text.split("- No change: ")[1]
    rules = len(PACK_RULES)
    assert f"Policy pack spear-fleet 0.1.0: **passed**; 0 advisory; {rules} rule(s) passed" in text


def test_a_new_model_in_prod_reads_as_restart(deployed_prod):
    def new_model(config):
        config["inferenceHosts"]["reds"]["model"]["shards"] = [
            {"name": f"Qwen3-Coder-Next-Q6_K-0000{i}-of-00003.gguf", "size": 21_000_000_000 + i,
             "sha256": hashlib.sha256(f"Q6_K shard {i}".encode()).hexdigest()} for i in (1, 2, 3)]

    with stack_changed(deployed_prod, new_model):
        _, text = summarized(deployed_prod)
    assert text.startswith("### `prod`: restart, no rebuild (after a model re-fetch)\n")
    assert "- **model files** (`reds-model`): **model re-fetch**" in text
    assert "  - shard removed: `Qwen3-Coder-Next-Q8_0-00004-of-00004.gguf`\n" in text
    assert "  - shard added: `Qwen3-Coder-Next-Q6_K-00003-of-00003.gguf`\n" in text
    assert "- **server.conf** (`reds-server-conf`): **config only (restart)**" in text
    assert (f"  - `SPEAR_SERVER_MODEL`: `{Q8_MODEL}` →"
            " `/opt/spear/models/gguf/Qwen3-Coder-Next-Q6_K-00001-of-00003.gguf`\n") in text
    assert "  - restarts: model, server_conf changed\n" in text
    assert "llama-server build (`reds-llama-server`)" in text.split("- No change: ")[1]
    assert "rebuild**" not in text


def test_a_new_context_size_in_prod_reads_as_config_only(deployed_prod):
    def smaller_window(config):
        config["inferenceHosts"]["reds"]["server"]["ctxSize"] = 262144

    with stack_changed(deployed_prod, smaller_window):
        _, text = summarized(deployed_prod)
    assert text.startswith("### `prod`: restart, no rebuild\n")
    assert "  - `SPEAR_SERVER_CTX`: `524288` → `262144`\n" in text
    assert "  - restarts: server_conf changed\n" in text


def test_a_llama_cpp_commit_bump_reads_as_rebuild(deployed_prod):
    def bump(config):
        config["inferenceHosts"]["reds"]["llamaCpp"]["source"]["commit"] = NEW_COMMIT

    with stack_changed(deployed_prod, bump):
        _, text = summarized(deployed_prod)
    assert "connection" not in text and "[secret]" not in text
    assert text.startswith("### `prod`: rebuild and restart\n")
    assert "- **llama-server build** (`reds-llama-server`): **rebuild**" in text
    assert f"  - `commit`: `{OLD_COMMIT}` → `{NEW_COMMIT}`\n" in text
    assert "  - restarts: build_key changed\n" in text
    assert "model files (`reds-model`)" in text.split("- No change: ")[1]
