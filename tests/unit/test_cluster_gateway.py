"""The gateway in the fleet's cluster (gateway.kubernetes) under Pulumi's mocks, from the local
stack's program with the gateway moved into the cluster: its Kubernetes objects and no host
resource; two replicas rolled one pod at a time, each proving every fleet route before LiteLLM
starts; keys and smoke tests through the API server's proxy, never SSH; credentials only in the
Secret; what each kind of change moves. And the config refuses what this placement cannot do."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from config.checker import ConfigError
from config.load import parse_stack
from spear import tokens
from spear.rules import pods_peer
from tests.support.config_cases import MASTER_KEY
from tests.unit import test_gateway_components as host

IMAGE = "localhost/spear-fleet/litellm-gateway:1.91.1"
DATABASE_URL = "postgresql://litellm:pw-SECRET-db@192.0.2.2:25441/litellm"


def cluster_raw() -> dict[str, Any]:
    raw = host.local_raw()
    gateway = raw["gateway"]
    for key in ("ssh", "runtimeDir", "listen"):
        gateway.pop(key)
    gateway.update(kubernetes={"replicas": 2, "image": IMAGE, "serviceIP": "10.96.100.30"},
                   database={"location": "external"})
    gateway["coder"]["upstreams"] = ["vllmFleet"]
    del raw["sshPrivateKeys"]["gateway"]
    # Without TLS, so without the local stack's seats (test_agent_seats.py has them in the cluster).
    for key in ("gatewayTlsCertificate", "gatewayTlsKey"):
        del raw[key]
    sandbox = raw["vllmFleet"]["agentSandbox"]
    for key in ("seats", "seatImage", "dialectCheckDeveloper"):
        del sandbox[key]
    return {**raw, "gatewayDatabaseUrl": DATABASE_URL}


def run(raw: dict[str, Any]) -> host.Program:
    return host.run_program(raw, [*host.SECRETS, "spear-fleet:gatewayDatabaseUrl"])


@pytest.fixture(scope="module")
def cluster() -> host.Program:
    return run(cluster_raw())


def deployment_spec(program: host.Program) -> dict[str, Any]:
    return program.inputs["gateway-deployment"]["spec"]


def test_the_cluster_gateway_is_kubernetes_objects_and_checks_with_no_host_resource(cluster):
    gateway = {n: t for n, t in cluster.types.items() if n.startswith("gateway")}
    assert {n: t for n, t in gateway.items() if "-key-" not in n and "-smoke-" not in n} == {
        "gateway": tokens.GATEWAY,
        "gateway-namespace": tokens.K8S_NAMESPACE.type,
        "gateway-credentials": tokens.K8S_SECRET.type,
        "gateway-config": tokens.K8S_CONFIG_MAP.type,
        "gateway-migrate-script": tokens.K8S_CONFIG_MAP.type,
        "gateway-migrations": tokens.K8S_JOB.type,
        "gateway-deployment": tokens.K8S_DEPLOYMENT.type,
        "gateway-service": tokens.K8S_SERVICE.type,
        "gateway-rollout": tokens.GATEWAY_ROLLOUT.type,
    }
    assert {t for n, t in gateway.items() if "-key-" in n} == {tokens.GATEWAY_KEY.type}
    assert not any("connection" in cluster.inputs[n] for n in gateway)


def test_the_agent_sandbox_reaches_the_gateways_pods_by_the_deployments_own_selector(cluster):
    deployment = cluster.inputs["gateway-deployment"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    [port] = container["ports"]
    assert cluster.inputs["vllm-agents-allow-egress"]["spec"]["egress"][0] == {
        "to": [pods_peer(deployment["metadata"]["namespace"],
                         deployment["spec"]["selector"]["matchLabels"])],
        "ports": [{"protocol": "TCP", "port": port["containerPort"]}]}


def test_two_replicas_roll_one_pod_at_a_time_and_each_proves_every_fleet_route_first(cluster):
    spec = deployment_spec(cluster)
    assert spec["replicas"] == 2
    assert spec["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    pod = spec["template"]["spec"]
    [prove] = pod["initContainers"]
    assert prove["command"] == ["python3", "-m", "spear_gateway.prove", "/config/proofs.json"]
    # Nothing is mounted over /tmp: the image may keep files there (the local image's venv does,
    # when its cache folder is under /tmp).
    assert all(m["mountPath"] == "/config" for c in (prove, *pod["containers"])
               for m in c["volumeMounts"])
    [litellm] = pod["containers"]
    assert litellm["image"] == prove["image"] == IMAGE
    assert litellm["command"][:3] == ["/opt/litellm/venv/bin/litellm", "--config",
                                      "/config/config.yaml"]
    assert litellm["readinessProbe"]["httpGet"]["path"] == "/health/readiness"
    # A loaded node answers probes slower than Kubernetes' default 1 s allows.
    assert {litellm[p]["timeoutSeconds"] for p in ("startupProbe", "livenessProbe",
                                                   "readinessProbe")} == {5}
    data = cluster.inputs["gateway-config"]["data"]
    assert json.loads(data["proofs.json"]) == [{
        "route": "vllm-stable", "api_base": "http://10.96.100.10:8000/v1",
        "served_model": "qwen3-coder-next", "key_env": "SPEAR_UPSTREAM_KEY_VLLM_STABLE"}]
    # The hook package, and what the proof imports, land where PYTHONPATH=/config finds them.
    paths = {item["path"] for item in pod["volumes"][0]["configMap"]["items"]}
    assert {"spear_gateway/prove.py", "spear/probes.py", "spear/smoke.py",
            "spear/tool_calls.py", "config.yaml"} <= paths


def test_keys_and_smoke_tests_reach_the_gateway_through_the_api_server_never_ssh(cluster):
    for name in ("gateway-key-ana", "gateway-smoke-ana"):
        props = cluster.inputs[name]
        assert props["cluster"]["namespace"] == "spear-gateway"
        assert props["cluster"]["service"] == "spear-gateway"
        # The API server drops Authorization; LiteLLM reads this header first.
        assert props["cluster"]["key_header"] == "x-litellm-api-key"
        assert "cluster" in cluster.secret_outputs[name]


def test_credentials_are_only_in_the_secret_and_config_yaml_names_them(cluster):
    secret = cluster.registered["gateway-credentials"]["stringData"]
    assert host.is_secret(secret)
    assert set(host.plain(secret)) == {"LITELLM_MASTER_KEY", "FRONTIER_API_KEY", "DATABASE_URL",
                                       "SPEAR_UPSTREAM_KEY_VLLM_STABLE"}
    config = cluster.inputs["gateway-config"]["data"]["config.yaml"]
    assert "os.environ/LITELLM_MASTER_KEY" in config and "os.environ/DATABASE_URL" in config
    # Everything else the gateway registers, secrets left out, holds no credential.
    shown = json.dumps({n: unsecret(cluster.registered[n]) for n in cluster.registered
                        if n.startswith("gateway")})
    assert MASTER_KEY not in shown and "pw-SECRET-db" not in shown


def unsecret(value: Any) -> Any:
    if host.is_secret(value):
        return "[secret]"
    if isinstance(value, dict):
        return {k: unsecret(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unsecret(v) for v in value]
    return value


def edited(change) -> host.Program:
    raw = copy.deepcopy(cluster_raw())
    change(raw["gateway"])
    return run(raw)


def test_a_litellm_bump_is_a_new_migrations_job_run_before_the_pods_roll(cluster):
    bumped = edited(lambda g: g["litellm"].update(version="1.108.7"))
    before, after = (p.inputs["gateway-migrations"]["metadata"]["name"] for p in (cluster, bumped))
    assert before != after and after.startswith("spear-gateway-migrate-")


def test_a_config_change_rolls_the_pods_and_runs_no_migration(cluster):
    retried = edited(lambda g: g["coder"].update(numRetries=5))
    assert retried.inputs["gateway-migrations"] == cluster.inputs["gateway-migrations"]
    annotations = [deployment_spec(p)["template"]["metadata"]["annotations"]
                   for p in (cluster, retried)]
    assert annotations[0]["spear-fleet/config"] != annotations[1]["spear-fleet/config"]
    assert annotations[0]["spear-fleet/hooks"] == annotations[1]["spear-fleet/hooks"]


def problems(raw: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as refused:
        parse_stack(raw)
    return str(refused.value)


def test_the_config_refuses_what_the_cluster_placement_cannot_do_all_at_once():
    raw = cluster_raw()
    gateway = raw["gateway"]
    gateway["ssh"] = {"host": "gw.internal"}
    gateway["database"] = {"location": "local"}
    gateway["coder"].update(upstreams=["vllmFleet", "local"], fleetRouting="prefix-affinity")
    gateway["kubernetes"].update(replicas=1, image="localhost/spear-fleet/litellm-gateway:latest")
    said = problems(raw)
    for line in (
        "spear-fleet:gateway.ssh: got a setting of the gateway host; allowed: nothing with"
        " gateway.kubernetes (the gateway runs in the cluster)",
        "spear-fleet:gateway.database.location: got 'local'; allowed: external with"
        " gateway.kubernetes",
        "spear-fleet:gateway.coder.upstreams[1]: got 'local'; allowed: vllmFleet only with"
        " gateway.kubernetes",
        "spear-fleet:gateway.kubernetes.replicas: got 1; allowed: an integer 2-50",
        "spear-fleet:gateway.kubernetes.image: got 'localhost/spear-fleet/litellm-gateway:latest';"
        " allowed: an image that pins LiteLLM",
        "spear-fleet:gateway.coder.fleetRouting: got 'prefix-affinity'; allowed: service with"
        " gateway.kubernetes",
    ):
        assert line in said, said


def test_the_cluster_gateway_leaves_the_pick_to_the_services_and_makes_no_token(cluster):
    assert "spear_pods" not in cluster.inputs["gateway-config"]["data"]["config.yaml"]
    assert not [name for name in cluster.inputs if name.startswith("vllm-router")]


def test_the_cluster_placement_needs_the_shared_databases_url():
    raw = cluster_raw()
    del raw["gatewayDatabaseUrl"]
    assert "spear-fleet:gatewayDatabaseUrl: got nothing; allowed: a secret (required with" \
           " gateway.database.location external)" in problems(raw)


BACKUP_KEY_TEXT = "cluster-backup-passphrase-0123456789abcdef"


def with_backup(raw: dict[str, Any], restore: str | None = None, **backup: Any) -> dict[str, Any]:
    raw = copy.deepcopy(raw)
    raw["gateway"]["database"]["backup"] = backup or {"hostPath": "/var/backups/spear-gateway",
                                                      "keep": 3}
    if restore:
        raw["gateway"]["database"]["restoreFrom"] = restore
    return {**raw, "gatewayBackupKey": BACKUP_KEY_TEXT}


def test_the_cluster_gateways_backup_takes_a_schedule_a_keep_and_one_volume():
    plan = parse_stack(with_backup(cluster_raw())).gateway.database.backup
    assert (plan.schedule, plan.keep, plan.host_path, plan.claim) == (
        "0 3 * * *", 3, "/var/backups/spear-gateway", None)
    claim = parse_stack(with_backup(cluster_raw(), claim="gateway-backups", schedule="@hourly"))
    assert (claim.gateway.database.backup.claim, claim.gateway.database.backup.schedule) == (
        "gateway-backups", "@hourly")
    for bad, key, allowed in (
            ({"keep": 3}, "gateway.database.backup", "one of hostPath (a folder on the node) or claim"),
            ({"hostPath": "/b", "claim": "c"}, "gateway.database.backup", "one of hostPath"),
            ({"hostPath": "/b", "schedule": "at three"}, "gateway.database.backup.schedule",
             "a cron schedule"),
            ({"hostPath": "/b", "onCalendar": "daily"}, "gateway.database.backup.onCalendar",
             "schedule, keep, hostPath, claim")):
        with pytest.raises(ConfigError) as error:
            parse_stack(with_backup(cluster_raw(), **bad))
        assert any(p.key == f"spear-fleet:{key}" and allowed in p.allowed
                   for p in error.value.problems), error.value


def test_a_cluster_restore_needs_the_backup_it_comes_from():
    raw = copy.deepcopy(cluster_raw())
    raw["gateway"]["database"]["restoreFrom"] = "litellm-20261201T030000Z.dump"
    with pytest.raises(ConfigError) as error:
        parse_stack(raw)
    assert "gateway.database.restoreFrom: got a dump without gateway.database.backup" in str(error.value)


@pytest.fixture(scope="module")
def backed_up() -> host.Program:
    return host.run_program(with_backup(cluster_raw(), restore="litellm-20261201T030000Z.dump"),
                            [*host.SECRETS, "spear-fleet:gatewayDatabaseUrl"])


def test_a_cronjob_dumps_the_shared_database_encrypted_with_the_key_into_its_volume(backed_up):
    assert backed_up.types["gateway-backup"] == tokens.K8S_CRON_JOB.type
    assert host.is_secret(backed_up.registered["gateway-backup-key"]["stringData"])
    cron = backed_up.inputs["gateway-backup"]["spec"]
    assert (cron["schedule"], cron["concurrencyPolicy"]) == ("0 3 * * *", "Forbid")
    pod = cron["jobTemplate"]["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["image"] == IMAGE
    assert container["command"] == ["sh", "/backup/backup-database.sh"]
    assert container["envFrom"] == [{"secretRef": {"name": "spear-gateway"}}]  # DATABASE_URL
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert (env["SPEAR_BACKUP_KEEP"], env["SPEAR_BACKUP_KEY_FILE"]) == ("3", "/etc/spear-backup/key")
    assert {v["name"]: {k: x for k, x in v.items() if k != "name"} for v in pod["volumes"]} == {
        "backups": {"hostPath": {"path": "/var/backups/spear-gateway", "type": "Directory"}},
        "key": {"secret": {"secretName": "spear-gateway-backup", "defaultMode": 0o400}},
        "script": {"configMap": {"name": "spear-gateway-backup"}}}
    script = backed_up.inputs["gateway-backup-script"]["data"]["backup-database.sh"]
    assert "openssl enc -e -aes-256-cbc -pbkdf2 -iter 200000" in script
    assert BACKUP_KEY_TEXT not in json.dumps(backed_up.inputs["gateway-backup"])


def test_a_restore_job_loads_the_dump_before_the_migrations_run(backed_up):
    [restore] = [n for n in backed_up.types if n == "gateway-restore"]
    command = backed_up.inputs[restore]["spec"]["template"]["spec"]["containers"][0]["command"]
    assert "/backups/litellm-20261201T030000Z.dump" in command[-1]
    assert 'pg_restore --dbname="$DATABASE_URL" --no-owner --exit-on-error' in command[-1]
    assert restore in backed_up.dependencies["gateway-migrations"]
