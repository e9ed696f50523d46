"""The agent seats (components/agent_seats): the manifests each harness's seat renders, and the
component under Pulumi's mocks from the program: after the gateway, on the fleet's provider and
after the agent namespace and its egress policies, a Secret with the developer's key (a Pulumi
secret), the wiring file as a ConfigMap and a Deployment that holds no credential, after its harness's dialect check (a Job that runs
one real turn with the CI developer's key); a harness bump, a key rotation and a wiring change
each restart the seat, and show in its pod template, and a bump runs the check again."""

from __future__ import annotations

import copy
import json
import runpy
import shlex
import subprocess
from dataclasses import dataclass
from typing import Any

import pulumi
import pytest

from components.agent_seats import manifests
from components.gateway.render import coder_window
from config.checker import ConfigError
from config.load import parse_stack
from spear import harness, seats, tokens
from tests.support import tls
from tests.support.config_cases import SEAT_IMAGE, SEAT_SECRETS, SEATS_GATEWAY_URL, seats_raw
from tests.support.stack_files import REPO, engine_config, program_mocks
from tests.unit.test_gateway_components import KeyMocks, SecretRecordingMonitor, is_secret, plain

URL = SEATS_GATEWAY_URL
TRUST = manifests.GatewayTrust.of(parse_stack(seats_raw()).gateway)
ALL_HARNESSES = {"ana-codex": {"developer": "ana", "harness": "codex"},
                 "bob-qwen": {"developer": "bob", "harness": "qwen-code", "workspaceSize": "20Gi"},
                 "bob-claude": {"developer": "bob", "harness": "claude-code"},
                 "ana-openhands": {"developer": "ana", "harness": "openhands"}}


def rendered(name: str = "ana-codex", raw: dict[str, Any] | None = None):
    """(sandbox, seat, its wiring entry) as the component renders them."""
    cfg = parse_stack(raw or seats_raw(**ALL_HARNESSES))
    sandbox = cfg.vllm_fleet.agent_sandbox
    seat = sandbox.seats[name]
    return sandbox, seat, manifests.wiring(seat, URL, cfg.harnesses, coder_window(cfg))


def pod(deployment: dict[str, Any]) -> dict[str, Any]:
    return deployment["spec"]["template"]["spec"]


# Each harness: the variable that holds the key, and where its wiring file goes (None: none).
KEY_VARIABLES = {"ana-codex": ("OWNED_API_KEY", "/workspace/.home/.codex/config.toml"),
                 "bob-qwen": ("OPENAI_API_KEY", "/workspace/.home/.qwen/settings.json"),
                 "bob-claude": ("ANTHROPIC_AUTH_TOKEN", None),
                 "ana-openhands": ("LLM_API_KEY", None)}


@pytest.mark.parametrize("name", list(KEY_VARIABLES))
def test_each_harness_gets_its_key_from_the_seats_secret_and_its_wiring_read_only_in_home(name):
    sandbox, seat, entry = rendered(name)
    variable, path = KEY_VARIABLES[name]
    spec = pod(manifests.deployment(sandbox, seat, entry, TRUST))
    [main] = spec["containers"]
    env = {e["name"]: e for e in main["env"]}
    assert env[variable] == {"name": variable, "valueFrom": {"secretKeyRef": {
        "name": f"seat-{name}-key", "key": "key"}}}
    # Every other variable is the harness's own wiring, with no key in it: one that embeds the
    # key (Claude Code's metrics header) names the key's variable for Kubernetes to expand.
    assert {e["name"]: e["value"] for e in main["env"] if "value" in e} == {
        "HOME": "/workspace/.home", "TMPDIR": "/workspace/.tmp",
        **{k: v.replace(manifests.KEY_PLACEHOLDER, f"$({variable})")
           for k, v in entry["env"].items() if k != variable}}
    names = [e["name"] for e in main["env"]]
    assert all(names.index(variable) < names.index(e["name"]) for e in main["env"]
               if f"$({variable})" in e.get("value", ""))
    assert manifests.KEY_PLACEHOLDER not in json.dumps(spec)
    assert (main["image"], main["command"], main["workingDir"]) == (
        SEAT_IMAGE, ["sleep", "infinity"], "/workspace")
    wiring = [m for m in main["volumeMounts"] if m["name"] == "wiring"]
    config_map = manifests.wiring_config_map(sandbox, seat, entry)
    if path is None:
        assert wiring == [] and config_map is None
    else:
        [mount] = wiring
        assert mount == {"name": "wiring", "mountPath": path,
                         "subPath": path.rsplit("/", 1)[1], "readOnly": True}
        assert config_map["data"] == {mount["subPath"]: entry["file"]["content"]}
        assert config_map["metadata"]["name"] == f"seat-{name}-wiring"
    assert seats.seat_problems(spec) == []


def test_the_seat_is_one_pod_labelled_by_seat_developer_and_harness_with_its_version_annotated():
    sandbox, seat, entry = rendered("bob-qwen")
    deployment = manifests.deployment(sandbox, seat, entry, TRUST, key_rotation=2)
    assert deployment["metadata"]["name"] == "seat-bob-qwen"
    assert deployment["metadata"]["namespace"] == "agents"
    assert deployment["metadata"]["labels"] == {
        "app.kubernetes.io/name": "agent-seat", "app.kubernetes.io/part-of": "spear-fleet",
        seats.SEAT: "bob-qwen", seats.DEVELOPER: "bob", seats.HARNESS: "qwen-code"}
    assert deployment["metadata"]["annotations"] == {seats.HARNESS_VERSION: "0.24.4"}
    spec = deployment["spec"]
    assert (spec["replicas"], spec["strategy"]) == (1, {"type": "Recreate"})
    annotations = spec["template"]["metadata"]["annotations"]
    assert (annotations[seats.HARNESS_VERSION], annotations[seats.KEY_ROTATION]) == ("0.24.4", "2")
    body = pod(deployment)
    assert body["volumes"][0] == {"name": "workspace", "emptyDir": {"sizeLimit": "20Gi"}}
    assert body["securityContext"] == {"runAsUser": 1000, "runAsGroup": 1000, "runAsNonRoot": True,
                                       "fsGroup": 1000, "seccompProfile": {"type": "RuntimeDefault"}}
    assert (body["automountServiceAccountToken"], body["enableServiceLinks"]) == (False, False)
    # The folders the harness writes are its user's before the read-only file lands in one.
    # First held until its node's guard filters it, then the folders the harness writes are its
    # user's before the read-only file lands in one.
    guarded, init = body["initContainers"]
    assert guarded["name"] == "guarded" and guarded["image"] == init["image"]
    assert guarded["volumeMounts"] == [{"name": "pod-info", "mountPath": "/etc/spear-fleet/pod",
                                        "readOnly": True}]
    assert init["command"] == ["mkdir", "-p", "/workspace/.home", "/workspace/.home/.qwen",
                               "/workspace/.tmp"]
    assert init["volumeMounts"] == [{"name": "workspace", "mountPath": "/workspace"}]
    assert manifests.start_command(sandbox, seat, entry) == (
        "kubectl -n agents exec -it deploy/seat-bob-qwen -c harness -- qwen")


def test_a_wiring_that_would_put_the_key_anywhere_but_a_variable_of_its_own_is_refused():
    sandbox, seat, entry = rendered("ana-codex")
    in_file = copy.deepcopy(entry)
    in_file["file"]["content"] += f'api_key = "{manifests.KEY_PLACEHOLDER}"\n'
    with pytest.raises(ValueError, match="wiring holds the key"):
        manifests.deployment(sandbox, seat, in_file, TRUST)
    embedded = copy.deepcopy(entry)
    embedded["env"]["OWNED_API_KEY"] = f"Bearer {manifests.KEY_PLACEHOLDER}"
    with pytest.raises(ValueError, match="OWNED_API_KEY embeds the key and no variable before it"):
        manifests.deployment(sandbox, seat, embedded, TRUST)


# ---------------------------------------------------------------------------------------------
# The component, from the program under Pulumi's mocks.


@dataclass
class Program:
    types: dict[str, str]
    registered: dict[str, dict[str, Any]]  # inputs as registered: secrets marked
    inputs: dict[str, dict[str, Any]]  # secrets unwrapped
    providers: dict[str, str]
    dependencies: dict[str, list[str]]
    seats: dict[str, Any]  # the `seats` stack output


def run(raw: dict[str, Any]) -> Program:
    mocks = KeyMocks()
    monitor = SecretRecordingMonitor(mocks)
    program_mocks(mocks, "prod", monitor)
    pulumi.runtime.set_all_config(engine_config(raw), SEAT_SECRETS)
    outputs: dict[str, Any] = {}

    @pulumi.runtime.test
    def program():
        component = runpy.run_path(str(REPO / "__main__.py"))["seats"]
        if component is None:
            return None
        return pulumi.Output.from_input(component.outputs).apply(outputs.update)

    try:
        program()
    finally:
        pulumi.runtime.set_all_config({}, [])
    return Program({n: a.typ for n, a in mocks.resources.items()},
                   {n: a.inputs for n, a in mocks.resources.items()},
                   {n: plain(a.inputs) for n, a in mocks.resources.items()},
                   {n: a.provider or "" for n, a in mocks.resources.items()},
                   monitor.dependencies, outputs)


@pytest.fixture(scope="module")
def seated() -> Program:
    return run(seats_raw(**ALL_HARNESSES))


def seat_resources(program: Program) -> dict[str, str]:
    return {n: t for n, t in program.types.items() if n == "seat" or n.startswith("seat-")}


def test_a_stack_without_seats_declares_none():
    raw = seats_raw()
    del raw["vllmFleet"]["agentSandbox"]["seats"], raw["vllmFleet"]["agentSandbox"]["seatImage"]
    program = run(raw)
    assert seat_resources(program) == {} and program.seats == {}
    assert "vllm-agents" in program.types and "gateway" in program.types


def test_each_seat_is_its_key_secret_its_wiring_and_its_deployment_on_the_fleets_provider(seated):
    assert seat_resources(seated) == {
        "seat": tokens.AGENT_SEATS,
        **{f"seat-{name}-key": tokens.K8S_SECRET.type for name in ALL_HARNESSES},
        **{f"seat-{name}": tokens.K8S_DEPLOYMENT.type for name in ALL_HARNESSES},
        "seat-ana-codex-wiring": tokens.K8S_CONFIG_MAP.type,
        "seat-bob-qwen-wiring": tokens.K8S_CONFIG_MAP.type,
        "seat-gateway-ca": tokens.K8S_CONFIG_MAP.type,  # the gateway's root, in every seat
        # Per harness the seats run, its dialect check: a Job with its own key and wiring.
        **{f"seat-dialect-{h}": tokens.K8S_JOB.type for h in harness.HARNESSES},
        **{f"seat-dialect-{h}-key": tokens.K8S_SECRET.type for h in harness.HARNESSES},
        "seat-dialect-codex-wiring": tokens.K8S_CONFIG_MAP.type,
        "seat-dialect-qwen-code-wiring": tokens.K8S_CONFIG_MAP.type,
        # What keeps the seats off their node, in a namespace of its own.
        "seat-node-guard-namespace": tokens.K8S_NAMESPACE.type,
        "seat-node-guard-serviceaccount": tokens.K8S_SERVICE_ACCOUNT.type,
        "seat-node-guard-role": tokens.K8S_ROLE.type,
        "seat-node-guard-rolebinding": tokens.K8S_ROLE_BINDING.type,
        "seat-node-guard-configmap": tokens.K8S_CONFIG_MAP.type,
        "seat-node-guard-daemonset": tokens.K8S_DAEMON_SET.type,
    }
    for name in seat_resources(seated):
        if name != "seat":
            assert "vllm-cluster" in seated.providers[name], name


def test_every_seat_comes_after_the_agent_namespace_and_its_egress_policies(seated):
    sandbox = {"vllm-agents", "vllm-agents-deny-egress", "vllm-agents-allow-egress"}
    for name in seat_resources(seated):
        if name != "seat":
            assert sandbox <= set(seated.dependencies[name]), name
    assert {"seat-ana-codex-key", "seat-ana-codex-wiring", "seat-gateway-ca"} <= set(
        seated.dependencies["seat-ana-codex"])


def test_each_seat_waits_for_its_harnesss_dialect_check_which_runs_one_real_turn_with_the_ci_key(seated):
    for name, seat in ALL_HARNESSES.items():
        check = f"seat-dialect-{seat['harness']}"
        assert check in seated.dependencies[f"seat-{name}"], name
        assert {f"{check}-key"} <= set(seated.dependencies[check])
    # The check developer's key (bob's), in the check's own Secret, as a Pulumi secret.
    secret = seated.registered["seat-dialect-codex-key"]["stringData"]
    assert is_secret(secret) and secret["value"] == {"key": "sk-bob-VIRTUAL"}
    job = seated.inputs["seat-dialect-codex"]
    spec = pod(job)
    [main] = spec["containers"]
    script = main["command"][2]
    assert main["command"][:2] == ["sh", "-c"] and shlex.join(harness.ONE_TURN["codex"]) in script
    assert "src/app.py" in script  # the file the turn's prompt asks the model to read
    # First, the image's harness must say the pinned version.
    assert script.startswith('version=$(codex --version) && case "$version" in'
                             f' *{harness.DEFAULT_VERSIONS["codex"]}*)')
    assert (spec["restartPolicy"], job["spec"]["backoffLimit"]) == ("Never", 0)
    assert main["terminationMessagePolicy"] == "FallbackToLogsOnError"  # the `up` says why
    # The same sandbox as a seat's, which the policy pack checks on every workload there.
    assert seats.seat_problems(spec) == [] and "VIRTUAL" not in json.dumps(seated.registered["seat-dialect-codex"])
    assert job["metadata"]["labels"][seats.DIALECT_CHECK] == "codex"


def test_the_key_reaches_only_the_secret_and_as_a_pulumi_secret(seated):
    secret = seated.registered["seat-bob-qwen-key"]["stringData"]
    assert is_secret(secret) and secret["value"] == {"key": "sk-bob-VIRTUAL"}
    assert seated.inputs["seat-bob-qwen-key"]["metadata"]["name"] == "seat-bob-qwen-key"
    for name in ALL_HARNESSES:
        deployment = seated.registered[f"seat-{name}"]
        assert "VIRTUAL" not in json.dumps(deployment), name
        assert seats.seat_problems(pod(deployment)) == [], name


def test_the_seat_reaches_the_gateways_configured_url_and_says_how_to_start_it(seated):
    spec = pod(seated.inputs["seat-bob-qwen"])
    env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
    # By the gateway's TLS name, which the seat resolves to its Service's fixed address, trusting
    # the root the stack's certificate ends in.
    assert env["OPENAI_BASE_URL"] == "https://gateway.spear.internal:4000/v1"
    assert spec["hostAliases"] == [{"ip": "10.96.100.42", "hostnames": ["gateway.spear.internal"]}]
    assert env["NODE_EXTRA_CA_CERTS"] == manifests.CA_FILE
    assert {"name": manifests.CA_VOLUME, "mountPath": manifests.CA_FILE, "subPath": manifests.CA_KEY,
            "readOnly": True} in spec["containers"][0]["volumeMounts"]
    assert seated.inputs["seat-gateway-ca"]["data"] == {manifests.CA_KEY: TRUST.root_pem}
    assert TRUST.root_pem in seats_raw()["gatewayTlsCertificate"]
    assert seated.seats["ana-codex"] == {
        "developer": "ana", "harness": "codex", "version": harness.DEFAULT_VERSIONS["codex"],
        "namespace": "agents",
        "start": "kubectl -n agents exec -it deploy/seat-ana-codex -c harness -- codex"}
    assert seated.seats["ana-openhands"]["start"].endswith("-- openhands --override-with-envs")


def _template(program: Program, name: str = "seat-ana-codex") -> dict[str, Any]:
    return program.inputs[name]["spec"]["template"]


# A stand-in for Codex in the check's shell: `--version` prints $VERSION, a turn prints $ANSWER
# and exits $STATUS (the real harnesses' turns are the in-cluster test's).
FAKE_CODEX = """#!/bin/sh
if [ "$1" = --version ]; then echo "codex-cli $VERSION"; exit 0; fi
[ -f src/app.py ] || exit 3
printf '%s' "$ANSWER"; exit "$STATUS"
"""


PINNED = harness.DEFAULT_VERSIONS["codex"]


def run_check(tmp_path, name: str, fake: str, env: dict[str, str]):
    """The harness's dialect check's script run in tmp_path with `fake` as the harness: (the
    Job's command, how it ended)."""
    sandbox, _, _ = rendered()
    check = manifests.dialect_check(sandbox, name)
    entry = manifests.wiring(check, URL, harness.DEFAULT_VERSIONS, None)
    script = pod(manifests.dialect_check_job(sandbox, check, entry, TRUST))["containers"][0]["command"]
    program = tmp_path / "bin" / harness.ONE_TURN[name][0]
    program.parent.mkdir()
    program.write_text(fake)
    program.chmod(0o755)
    return script, subprocess.run(script, cwd=tmp_path, capture_output=True, text=True, timeout=30,
                                  env={"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", **env})


@pytest.mark.parametrize("version,answer,status,passes,said", [
    (PINNED, "It prints 42.", 0, True, ""),
    ("0.1.0", "It prints 42.", 0, False,
     f"the seat image's codex says codex-cli 0.1.0; the stack pins {PINNED}"),
    (PINNED, "", 0, False, ""),
    (PINNED, "stream error", 1, False, ""),
], ids=["pinned-and-answered", "another-version-in-the-image", "empty-answer", "harness-failed"])
def test_the_dialect_check_passes_only_the_pinned_harness_answering_its_turn(
        tmp_path, version, answer, status, passes, said):
    _, done = run_check(tmp_path, "codex", FAKE_CODEX, {"VERSION": version, "ANSWER": answer,
                                                        "STATUS": str(status)})
    assert (done.returncode == 0) is passes, (done.returncode, done.stdout, done.stderr)
    assert said in done.stderr
    # The turn's file is written only once the version is the pinned one.
    assert (tmp_path / "src" / "app.py").exists() is (version == PINNED)


# A stand-in for OpenHands 1.16 with --json: a banner, the task as a user MessageEvent, then, as
# $ENDING says, the agent's answer as a MessageEvent, its `finish` call, or nothing (every request
# refused); exit 0 in each case, as the real one.
FAKE_OPENHANDS = """#!/bin/sh
if [ "$1" = --version ]; then echo "OpenHands CLI $VERSION"; exit 0; fi
echo 'OpenHands SDK banner'
echo '{"id": "1", "source": "user", "llm_message": {"role": "user"}, "kind": "MessageEvent"}'
echo 'Agent is working'
case "$ENDING" in
  answer) echo '{"id": "2", "source": "agent", "llm_message": {"role": "assistant", "content":' \
            '[{"type": "text", "text": "It prints 42."}]}, "kind": "MessageEvent"}';;
  finish) echo '{"id": "2", "source": "agent", "thought": [], "action": {"message": "",' \
            '"kind": "FinishAction"}, "tool_name": "finish", "kind": "ActionEvent"}';;
esac
echo 'Agent finished'; echo 'CONVERSATION SUMMARY'
"""


@pytest.mark.parametrize("ending,passes", [("answer", True), ("finish", True), ("none", False)],
                         ids=["answered", "finished-by-its-tool", "every-request-refused"])
def test_an_openhands_check_needs_the_agents_answer_not_just_its_exit_status(
        tmp_path, ending, passes):
    script, done = run_check(tmp_path, "openhands", FAKE_OPENHANDS, {
        "ENDING": ending, "VERSION": harness.DEFAULT_VERSIONS["openhands"]})
    assert (done.returncode == 0) is passes, (done.returncode, done.stdout, done.stderr)
    assert "--json" in script[2]


def test_a_harness_bump_a_key_rotation_and_a_wiring_change_each_change_the_pod_template(seated):
    before = _template(seated)["metadata"]["annotations"]
    raw = seats_raw(**ALL_HARNESSES)
    bumped = run({**raw, "harnesses": {"codex": "0.170.0"}})
    assert _template(bumped)["metadata"]["annotations"] == {**before,
                                                            seats.HARNESS_VERSION: "0.170.0"}
    assert bumped.inputs["seat-ana-codex"]["metadata"]["annotations"] == {
        seats.HARNESS_VERSION: "0.170.0"}
    assert bumped.seats["ana-codex"]["version"] == "0.170.0"
    # The other harnesses' seats do not move.
    assert _template(bumped, "seat-bob-qwen") == _template(seated, "seat-bob-qwen")
    # The bumped harness's dialect check is a new Job (its template is immutable): it runs again.
    assert (_template(bumped, "seat-dialect-codex")["metadata"]["annotations"][seats.HARNESS_VERSION]
            == "0.170.0")
    assert _template(bumped, "seat-dialect-qwen-code") == _template(seated, "seat-dialect-qwen-code")

    rotated = copy.deepcopy(raw)
    rotated["developers"]["ana"]["rotation"] = 1
    rotated_program = run(rotated)
    assert _template(rotated_program)["metadata"]["annotations"] == {**before,
                                                                     seats.KEY_ROTATION: "1"}
    assert _template(rotated_program, "seat-bob-qwen") == _template(seated, "seat-bob-qwen")

    moved = copy.deepcopy(raw)  # the gateway's URL, in Codex's config.toml
    moved["gateway"]["kubernetes"]["tls"]["name"] = "gw2.spear.internal"
    moved["gatewayTlsCertificate"], moved["gatewayTlsKey"] = tls.issue("gw2.spear.internal")
    wiring_changed = run(moved)
    assert (_template(wiring_changed)["metadata"]["annotations"][seats.WIRING_SHA256]
            != before[seats.WIRING_SHA256])
    assert '"https://gw2.spear.internal:4000/v1"' in wiring_changed.inputs["seat-ana-codex-wiring"]["data"]["config.toml"]


def test_a_seat_image_built_here_is_read_from_the_file_its_build_wrote(tmp_path):
    ref_file = tmp_path / "seat.ref"
    ref_file.write_text(SEAT_IMAGE + "\n")
    raw = seats_raw()
    raw["vllmFleet"]["agentSandbox"]["seatImage"] = {"file": str(ref_file)}
    assert parse_stack(raw).vllm_fleet.agent_sandbox.seat_image == SEAT_IMAGE
    # A file that holds a tag alone, and a file that is not there: each named with what to do.
    ref_file.write_text("localhost/spear-fleet/seat:h-1\n")
    with pytest.raises(ConfigError) as error:
        parse_stack(raw)
    assert f"vllmFleet.agentSandbox.seatImage.file ({ref_file}): got" \
           " 'localhost/spear-fleet/seat:h-1'; allowed: an image pinned by digest" in str(error.value)
    raw["vllmFleet"]["agentSandbox"]["seatImage"] = {"file": str(tmp_path / "missing.ref")}
    with pytest.raises(ConfigError) as error:
        parse_stack(raw)
    assert "seatImage.file: got " in str(error.value)
    assert "No such file or directory; allowed: a file holding the image's pinned" \
           " reference (localhosts/images/seat_image.py writes the local stack's: run scripts/up-local)" \
           in str(error.value)
