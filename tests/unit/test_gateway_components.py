"""The gateway's resources under Pulumi's mocks, from the local stack's program: each part with its
own type; the credentials secret where the engine is told; and the diff of each kind of change
(the providers' own diffs of the inputs two runs of the program give) is the upgrade a reviewer
must see: a budget change updates one key in place, a LiteLLM bump replaces the install and
restarts the proxy, a config-only change rewrites config.yaml and restarts, nothing else moves."""

from __future__ import annotations

import copy
import json
import runpy
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml
from pulumi.runtime.mocks import MockMonitor

from components.gateway.install import LitellmInstallProvider
from components.gateway.keys import GatewayKeyProvider
from components.hostops.remote_file import RemoteFileProvider
from components.hostops.systemd_unit import SystemdUnitProvider
from spear import tokens
from tests.support.config_cases import FRONTIER_KEY, MASTER_KEY
from tests.support.stack_files import (DUMMY_KEY, REPO, RecordingMocks, engine_config, program_mocks,
                                       stack_raw)

SECRETS = ["spear-fleet:sshPrivateKeys", "spear-fleet:gatewayMasterKey",
           "spear-fleet:frontierApiKey", "spear-fleet:vllmApiKey",
           "spear-fleet:gatewayTlsCertificate", "spear-fleet:gatewayTlsKey",
           "spear-fleet:gatewayBackupKey"]
_SIG, _SECRET = "4dabf18193072939515e22adb298388d", "1b47061264138c4ac30d75fd1eb44270"


KUBECONFIG = Path(tempfile.mkdtemp(prefix="spear-unit-")) / "kubeconfig"
KUBECONFIG.write_text(yaml.safe_dump({
    "apiVersion": "v1", "kind": "Config", "current-context": "local",
    "clusters": [{"name": "local", "cluster": {"server": "https://127.0.0.1:6440",
                                               "certificate-authority-data": "Q0EtUEVN"}}],
    "contexts": [{"name": "local", "context": {"cluster": "local", "user": "admin"}}],
    "users": [{"name": "admin", "user": {"token": "admin-token"}}]}))


def local_raw() -> dict[str, Any]:
    """The local stack with its keys given as secrets (no key files needed) and its secrets (the
    gateway's two, vLLM's key) decrypted to placeholders."""
    raw = stack_raw("local")
    del raw["inferenceHosts"]["local"]["ssh"]["privateKeyPath"], raw["gateway"]["ssh"]["privateKeyPath"]
    # The cluster's kubeconfig as its start writes it (the program reads its API server for the
    # gateway's pod listing), without a cluster.
    raw["vllmFleet"]["kubeconfig"] = str(KUBECONFIG)
    return {**raw, "sshPrivateKeys": {"local": DUMMY_KEY, "gateway": DUMMY_KEY},
            "gatewayMasterKey": MASTER_KEY, "frontierApiKey": FRONTIER_KEY,
            "vllmApiKey": "sk-vllm-PLACEHOLDER"}


class SecretRecordingMonitor(MockMonitor):
    """The mock monitor, also recording what each resource tells the engine to keep secret, and
    its dependencies by name."""

    def __init__(self, mocks: pulumi.runtime.Mocks) -> None:
        super().__init__(mocks)
        self.secret_outputs: dict[str, list[str]] = {}
        self.dependencies: dict[str, list[str]] = {}

    def RegisterResource(self, request):  # noqa: N802 (the gRPC method's name)
        self.secret_outputs[request.name] = list(request.additionalSecretOutputs)
        self.dependencies[request.name] = [urn.rsplit("::", 1)[1] for urn in request.dependencies]
        return super().RegisterResource(request)


class KeyMocks(RecordingMocks):
    """A developer key resource answers with a key, as /key/generate does."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        name, state = super().new_resource(args)
        if args.typ == tokens.GATEWAY_KEY.type:
            state = {**state, "key": f"sk-{args.inputs['developer']}-VIRTUAL"}
        return name, state


@dataclass
class Program:
    types: dict[str, str]
    registered: dict[str, dict[str, Any]]  # inputs as registered: secrets marked
    inputs: dict[str, dict[str, Any]]  # secrets unwrapped
    secret_outputs: dict[str, list[str]]
    secret: dict[str, bool] = field(default_factory=dict)  # which outputs are secret
    # What the stack exports of the harnesses: each developer's wiring, the gateway's versions.
    exported: dict[str, Any] = field(default_factory=dict)
    dependencies: dict[str, list[str]] = field(default_factory=dict)


def run_program(raw: dict[str, Any], secret_keys: list[str] = SECRETS) -> Program:
    mocks = KeyMocks()
    monitor = SecretRecordingMonitor(mocks)
    program_mocks(mocks, "local", monitor)
    pulumi.runtime.set_all_config(engine_config(raw), secret_keys)
    secret: dict[str, bool] = {}
    exported: dict[str, Any] = {}

    @pulumi.runtime.test
    def program():
        gateway = runpy.run_path(str(REPO / "__main__.py"))["gateway"]
        outputs = {f"harnesses:{dev}": wiring for dev, wiring in gateway.harnesses.items()}
        values = {**outputs, "harness_versions": gateway.outputs["harness_versions"],
                  "served_window": gateway.outputs["served_window"]}
        return pulumi.Output.all(
            pulumi.Output.all(*(o.is_secret() for o in outputs.values())).apply(
                lambda flags: secret.update(zip(outputs, flags))),
            pulumi.Output.all(*values.values()).apply(
                lambda got: exported.update(zip(values, got))))

    try:
        program()
    finally:
        pulumi.runtime.set_all_config({}, [])
    return Program({n: a.typ for n, a in mocks.resources.items()},
                   {n: a.inputs for n, a in mocks.resources.items()},
                   {n: plain(a.inputs) for n, a in mocks.resources.items()},
                   monitor.secret_outputs, secret, exported, monitor.dependencies)


def is_secret(value: Any) -> bool:
    return isinstance(value, dict) and value.get(_SIG) == _SECRET


def plain(value: Any) -> Any:
    """Inputs with secrets unwrapped (as a provider's diff sees them)."""
    if is_secret(value):
        return plain(value["value"])
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


@pytest.fixture(scope="module")
def local() -> Program:
    return run_program(local_raw())


def changed(before: Program, after: Program) -> dict[str, list[str]]:
    """Resource -> the inputs that differ between two runs (the pickled provider left out)."""
    assert set(before.inputs) == set(after.inputs)
    diff = {name: sorted(k for k in set(old) | set(after.inputs[name])
                         if k != "__provider" and old.get(k) != after.inputs[name].get(k))
            for name, old in before.inputs.items()}
    return {name: keys for name, keys in diff.items() if keys}


def edited(change) -> dict[str, Any]:
    raw = copy.deepcopy(local_raw())
    change(raw)
    return raw


# The local stack's developers: three people and the rollout gate's two CI keys.
LOCAL_DEVELOPERS = ("ana", "bob", "cyn", "gate", "gate-pilot")


def test_the_local_program_registers_each_part_of_the_gateway_with_its_own_type(local):
    gateway = {name: typ for name, typ in local.types.items() if name.startswith("gateway")}
    hooks = {name for name, typ in gateway.items() if typ == tokens.GATEWAY_HOOK_FILE.type}
    assert {name: typ for name, typ in gateway.items() if name not in hooks} == {
        "gateway": tokens.GATEWAY,
        "gateway-litellm": tokens.LITELLM_INSTALL.type,
        "gateway-postgresql": tokens.GATEWAY_DATABASE.type,
        "gateway-migrations": tokens.COMMAND_REMOTE.type,  # pulumi-command: a one-shot
        "gateway-backup": tokens.GATEWAY_BACKUP.type,  # the local stack backs its database up
        "gateway-config": tokens.GATEWAY_CONFIG.type,
        "gateway-env": tokens.GATEWAY_ENV.type,
        "gateway-host-key": tokens.HOST_KEY.type,  # the key the gateway host must present
        "gateway-tunnel-local-key": tokens.TUNNEL_KEY.type,
        "gateway-tunnel-local-known-hosts": tokens.TUNNEL_KNOWN_HOSTS.type,  # what `local` presents
        "gateway-tunnel-local": tokens.GATEWAY_TUNNEL.type,
        "gateway-service": tokens.GATEWAY_SERVICE.type,
        # gateway.listen.tls: what the HTTPS listener serves.
        "gateway-tls-gateway-crt": tokens.GATEWAY_TLS_FILE.type,
        "gateway-tls-gateway-key": tokens.GATEWAY_TLS_FILE.type,
        **{f"gateway-key-{dev}": tokens.GATEWAY_KEY.type for dev in LOCAL_DEVELOPERS},
        **{f"gateway-smoke-{dev}": tokens.GATEWAY_SMOKE_TEST.type for dev in LOCAL_DEVELOPERS},
        # The fleet's stable track, proven from the gateway host before its route is written.
        "gateway-vllm-stable-verification": tokens.ENDPOINT_VERIFICATION.type,
        "gateway-vllm-stable-smoke-test": tokens.SMOKE_TEST.type,
        # And its throughput, measured there after every change of its pair.
        "gateway-vllm-stable-throughput": tokens.FLEET_THROUGHPUT.type,
    }
    assert "gateway-hook-spear-rules" in hooks  # the hook shares the one rules module
    tunnel = local.inputs["gateway-tunnel-local"]
    assert (tunnel["unit"], tunnel["health"]["port"]) == ("spear-tunnel-local.service", 8082)
    assert local.inputs["gateway-config"]["upstreams"] == ["local", "vllmFleet"]
    assert "api_base: http://127.0.0.1:8082/v1" in local.inputs["gateway-config"]["content"]


def test_the_https_listener_serves_the_stacks_certificate_and_seats_are_wired_to_it_by_name(local):
    unit = local.inputs["gateway-service"]["content"]
    assert "Environment=SPEAR_TLS_LISTEN=192.0.2.2:4443" in unit
    assert "--host 127.0.0.1 --port 4000" in unit  # loopback stays plain HTTP
    for suffix, pem in (("crt", "BEGIN CERTIFICATE"), ("key", "PRIVATE KEY")):
        tls_file = local.registered[f"gateway-tls-gateway-{suffix}"]
        assert is_secret(tls_file["content"]) and pem in plain(tls_file["content"])
        assert tls_file["mode"] == 0o600
    binds = local.inputs["gateway-config"]["binds"]
    assert {(b["address"], b["port"]) for b in binds} == {("127.0.0.1", 4000), ("192.0.2.2", 4443)}
    # Developers' harnesses are wired to it by name, trusting the stack's root.
    qwen = local.exported["harnesses:ana"]["qwen-code"]
    assert qwen["env"]["OPENAI_BASE_URL"].startswith("https://gateway.spear.internal:4443")
    assert "BEGIN CERTIFICATE" in str(qwen)


def test_the_env_file_and_every_developer_key_are_secrets(local):
    env_file = local.registered["gateway-env"]
    assert is_secret(env_file["content"])
    assert MASTER_KEY in plain(env_file["content"]) and FRONTIER_KEY in plain(env_file["content"])
    assert "content" in local.secret_outputs["gateway-env"]
    assert "content" in local.secret_outputs["gateway-tunnel-local-key"]
    for dev in ("ana", "bob", "cyn"):
        # The engine keeps these secret (mocks do not apply it to the key output itself).
        assert {"connection", "master_key", "key"} <= set(local.secret_outputs[f"gateway-key-{dev}"])
        assert local.secret[f"harnesses:{dev}"]
    # config.yaml is plain, and holds no secret.
    assert "content" not in local.secret_outputs["gateway-config"]
    assert MASTER_KEY not in local.inputs["gateway-config"]["content"]


def test_a_budget_change_for_one_developer_changes_only_that_key(local):
    raised = run_program(edited(lambda raw: raw["developers"]["ana"].update(maxBudget=40)))
    assert changed(local, raised) == {"gateway-key-ana": ["max_budget"]}
    diff = GatewayKeyProvider().diff("ana", local.inputs["gateway-key-ana"],
                                     raised.inputs["gateway-key-ana"])
    assert diff.changes and diff.replaces == []  # /key/update: the developer keeps the key


def test_a_litellm_version_bump_replaces_the_install_and_restarts_the_proxy(local):
    bumped = run_program(edited(lambda raw: raw["gateway"]["litellm"].update(version="1.108.7")))
    assert changed(local, bumped) == {
        "gateway-litellm": ["install_key", "version"],
        "gateway-migrations": ["triggers"],
        "gateway-config": ["litellm_version"],
        "gateway-service": ["restart_triggers"],
        # The fleet's rollout record says what its stable pair is served with now.
        "vllm-rollout": ["data"],
    }
    served = json.loads(bumped.inputs["vllm-rollout"]["data"]["served-with.json"])
    assert served["gatewayVersion"] == "1.108.7"
    old, new = local.inputs, bumped.inputs
    assert LitellmInstallProvider().diff("", old["gateway-litellm"],
                                         new["gateway-litellm"]).replaces == ["install_key"]
    triggers = (old["gateway-service"]["restart_triggers"], new["gateway-service"]["restart_triggers"])
    assert [k for k in triggers[0] if triggers[0][k] != triggers[1][k]] == ["install_key"]
    assert triggers[1]["install_key"] == new["gateway-litellm"]["install_key"]
    # The config file's only change is a recorded fact: its content, and so its write, is the same.
    assert RemoteFileProvider().diff("", old["gateway-config"], new["gateway-config"]).changes is False


def test_a_harness_version_bump_changes_the_exported_versions_wiring_and_rollout_record_alone(local):
    bumped = run_program(edited(lambda raw: raw["harnesses"].update(codex="0.170.0")))
    # The fleet's rollout record says what its stable pair is served with: nothing that runs.
    assert changed(local, bumped) == {"vllm-rollout": ["data"]}
    served = json.loads(bumped.inputs["vllm-rollout"]["data"]["served-with.json"])
    assert served["harnessVersions"]["codex"] == "0.170.0"
    assert bumped.exported["harness_versions"] == {**local.exported["harness_versions"],
                                                   "codex": "0.170.0"}
    assert bumped.exported["harnesses:ana"]["codex"]["install"] == "npm install -g @openai/codex@0.170.0"
    assert local.exported["harnesses:ana"]["codex"]["install"] == "npm install -g @openai/codex@0.169.0"


def test_every_harness_is_told_the_window_the_local_stack_serves(local):
    # The inference host's ctxSize 32768 in its one slot, the fleet's maxModelLen 32768.
    assert local.exported["served_window"] == {"context": 32768, "max_output": 4096}
    claude = local.exported["harnesses:ana"]["claude-code"]["env"]
    assert claude["CLAUDE_CODE_MAX_CONTEXT_TOKENS"] == "32768"


def test_a_config_only_change_rewrites_config_yaml_and_restarts_nothing_else_moves(local):
    retried = run_program(edited(lambda raw: raw["gateway"]["coder"].update(numRetries=3)))
    assert changed(local, retried) == {"gateway-config": ["content"],
                                       "gateway-service": ["restart_triggers"]}
    old, new = local.inputs, retried.inputs
    assert "num_retries: 3" in new["gateway-config"]["content"]
    write = RemoteFileProvider().diff("", old["gateway-config"], new["gateway-config"])
    assert write.changes and write.replaces == []
    triggers = (old["gateway-service"]["restart_triggers"], new["gateway-service"]["restart_triggers"])
    assert [k for k in triggers[0] if triggers[0][k] != triggers[1][k]] == ["config"]
    restart = SystemdUnitProvider().diff("", old["gateway-service"], new["gateway-service"])
    assert restart.changes and restart.replaces == []


def test_coder_routes_to_the_fleets_stable_service_at_its_fixed_cluster_ip_proven_first(local):
    import yaml
    config = yaml.safe_load(local.inputs["gateway-config"]["content"])
    [fleet] = [m for m in config["model_list"] if m.get("model_info", {}).get("id") == "vllm-stable"]
    assert fleet["litellm_params"]["api_base"] == "http://10.96.100.10:8000/v1"
    assert fleet["litellm_params"]["api_key"] == "os.environ/SPEAR_UPSTREAM_KEY_VLLM_STABLE"
    # The hook stamps both fields on it (the local fleet schedules by priority), neither on the
    # host; and picks its pod by prefix affinity, from the Service's EndpointSlices (the default
    # on a gateway host), falling back to the Service's address above.
    assert fleet["model_info"] == {"id": "vllm-stable", "spear_track": "stable",
                                   "spear_cache_salt": True, "spear_priority": True,
                                   "spear_pods": {"namespace": "vllm", "service": "vllm",
                                                  "port": 8000}}
    [host] = [m for m in config["model_list"] if m.get("model_info", {}).get("id") == "local"]
    assert host["model_info"] == {"id": "local"}
    assert config["environment_variables"]["SPEAR_CACHE_SALT_SCOPE"] == "team"
    assert local.inputs["gateway-config"]["upstreams"] == ["local", "vllmFleet"]
    proof = local.inputs["gateway-vllm-stable-verification"]
    assert (proof["address"], proof["port"], proof["served_model"]) == ("10.96.100.10", 8000, "qwen3-coder-next")
    assert proof["triggers"]["pair"]["image"] == "localhost/spear-fleet/vllm-standin:v0.24.0"
    # vLLM's key reaches the gateway only in its 0600 env file, as a secret.
    assert "SPEAR_UPSTREAM_KEY_VLLM_STABLE=\"sk-vllm-PLACEHOLDER\"" in local.inputs["gateway-env"]["content"]
    assert is_secret(local.registered["gateway-env"]["content"])
    # The token that lists the pods: the fleet's own, read-only on EndpointSlices and pods, in
    # the env file.
    assert "SPEAR_FLEET_API_TOKEN=\"mock-router-token\"" in local.inputs["gateway-env"]["content"]
    assert 'SPEAR_FLEET_API_SERVER="https://127.0.0.1:6440"' in local.inputs["gateway-env"]["content"]
    assert 'SPEAR_FLEET_API_CA="Q0EtUEVN"' in local.inputs["gateway-env"]["content"]
    assert local.inputs["vllm-router-role"]["rules"] == [
        {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
         "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]
    assert local.inputs["vllm-router-token"]["type"] == "kubernetes.io/service-account-token"


def test_fleet_routing_service_leaves_the_pick_to_the_service_and_makes_no_token(local):
    spread = run_program(edited(lambda raw: raw["gateway"]["coder"].update(fleetRouting="service")))
    import yaml
    config = yaml.safe_load(spread.inputs["gateway-config"]["content"])
    [fleet] = [m for m in config["model_list"] if m.get("model_info", {}).get("id") == "vllm-stable"]
    assert "spear_pods" not in fleet["model_info"]
    assert "SPEAR_FLEET_API" not in spread.inputs["gateway-env"]["content"]
    assert not [name for name in spread.inputs if name.startswith("vllm-router")]


def test_each_developers_gateway_smoke_test_must_be_answered_by_every_route_its_ring_reaches(local):
    for dev in ("ana", "bob", "gate-pilot"):  # general and pilot rings, no canary up
        assert local.inputs[f"gateway-smoke-{dev}"]["routes"] == ["local", "vllm-stable"]
    for dev in ("cyn", "gate"):  # the stable ring: the fleet's stable track alone
        assert local.inputs[f"gateway-smoke-{dev}"]["routes"] == ["vllm-stable"]


def test_the_hatch_is_declared_once_and_its_spend_alert_rule_is_the_gateways(local):
    raw = local_raw()
    hatch = raw["gateway"]["hatch"]
    rules = yaml.safe_load(local.inputs["vllm-alerts"]["data"]["spear-fleet-vllm.rules.yaml"])
    [spend] = [r for r in rules["groups"][0]["rules"] if r["alert"] == "HatchSpendNearCap"]
    assert spend["expr"] == f"max(spear_hatch_spend_usd) >= {hatch['alertUsd']:g}"
    assert f"of the {hatch['monthlyCapUsd']:g} USD cap" in spend["annotations"]["summary"]
    config = yaml.safe_load(local.inputs["gateway-config"]["content"])
    assert config["environment_variables"]["SPEAR_HATCH_MONTHLY_CAP_USD"] == \
        str(float(hatch["monthlyCapUsd"]))
