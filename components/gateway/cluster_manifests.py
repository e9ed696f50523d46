"""Pure renderers of the gateway's Kubernetes objects (gateway.kubernetes): typed config in,
manifests out; no Pulumi. components/gateway/cluster.py registers them.

The pods: an init container that proves every fleet route from the pod
(hosts/gateway/spear_gateway/prove.py), then LiteLLM with config.yaml and the hook package from
a ConfigMap and every credential from a Secret; with gateway.kubernetes.tls, HTTPS only, with the
certificate and key from a Secret of their own. A rolling update never takes a ready pod away
before its successor proved its routes and answers (maxUnavailable 0): a route that fails its
proof is never served, and the pods before it go on serving what they proved.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from components.gateway.render import HOOK_FILES
from config.types import ClusterBackupPlan, Gateway
from spear.rules import APP_LABEL, GATEWAY_APP, GATEWAY_FACTS_ANNOTATION, GATEWAY_POD_LABELS

NAME = GATEWAY_APP
LABELS = {**GATEWAY_POD_LABELS, "app.kubernetes.io/part-of": "spear-fleet"}
SECRET = NAME  # the master key, the frontier key, the database URL, the fleet's key
CONFIG_MAP = f"{NAME}-config"  # config.yaml, the hook package, the routes to prove
MIGRATE_CONFIG_MAP = f"{NAME}-migrate"  # hosts/gateway/migrate.sh
TLS_SECRET = f"{NAME}-tls"  # gateway.kubernetes.tls: the certificate bundle and its key
# gateway.database.backup in the cluster: the CronJob, the Secret of gatewayBackupKey and the
# ConfigMap of hosts/gateway/backup-database.sh, all named so; a restore's Job is NAME-restore-*.
BACKUP = f"{NAME}-backup"
BACKUP_DIR, BACKUP_KEY_DIR, BACKUP_SCRIPT_DIR = "/backups", "/etc/spear-backup", "/backup"
BACKUP_KEY_FILE = f"{BACKUP_KEY_DIR}/key"
CONFIG_DIR = "/config"
TLS_DIR = "/tls"
MIGRATE_DIR = "/migrate"
PROOFS_FILE = "proofs.json"
UID = 1000
# LiteLLM's start (imports, the Prisma client) takes 40-70 s on two cores: the startup probe
# allows 5 minutes before liveness counts.
STARTUP_SECONDS = 300
PROBE_PERIOD = 5
# Kubernetes' default probe timeout is 1 s; a cold CI run (load 10 on two cores) saw a replica
# unready right after its rollout, when readiness (a database round trip) can take longer.
PROBE_TIMEOUT = 5
# How long the `up` waits for a rollout (every new pod's proof included) before failing.
ROLLOUT_TIMEOUT_SECONDS = 900


def config_key(path: str) -> str:
    """A file's key in the ConfigMap (keys allow no '/': spear_gateway/budget.py ->
    spear_gateway.budget.py)."""
    return path.replace("/", ".")


def config_data(config_yaml: str, proofs: list[dict[str, Any]]) -> dict[str, str]:
    """The config ConfigMap's data: config.yaml, the hook files and the routes to prove."""
    return {"config.yaml": config_yaml, PROOFS_FILE: json.dumps(proofs, indent=2),
            **{config_key(remote): local.read_text() for remote, local in HOOK_FILES.items()}}


def config_items() -> list[dict[str, str]]:
    """Where each ConfigMap key lands under CONFIG_DIR (the hook package keeps its folders)."""
    return [{"key": key, "path": key} for key in ("config.yaml", PROOFS_FILE)] + [
        {"key": config_key(remote), "path": remote} for remote in HOOK_FILES]


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _security() -> dict[str, Any]:
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
            "runAsNonRoot": True, "runAsUser": UID, "runAsGroup": UID}


def _environment() -> list[dict[str, str]]:
    # HOME on the writable scratch folder: Prisma and LiteLLM write caches there.
    return [{"name": "PYTHONPATH", "value": CONFIG_DIR}, {"name": "HOME", "value": "/tmp"},
            {"name": "LITELLM_LOCAL_MODEL_COST_MAP", "value": "True"},
            # The migrations Job applies the schema (migrate.sh); LiteLLM must not try.
            {"name": "DISABLE_SCHEMA_UPDATE", "value": "true"}]


def deployment(gateway: Gateway, rollout: dict[str, Any]) -> dict[str, Any]:
    """The gateway's Deployment. `rollout`: pod-template annotations whose change rolls the pods
    (the config's, the hooks' and the Secret's digests, each fleet track's generation: a track's
    rollout makes every pod prove it again)."""
    cluster = gateway.kubernetes
    # No volume over /tmp: the image's own /tmp is writable in the container, and a volume there
    # would hide whatever the image keeps under it (the local image's virtualenv, when its cache
    # folder is under /tmp).
    mounts = [{"name": "config", "mountPath": CONFIG_DIR, "readOnly": True}]
    credentials = [{"secretRef": {"name": SECRET}}]
    # The kubelet's HTTPS probes do not check the certificate; they ask what plain HTTP would.
    http = {"port": gateway.port, **({"scheme": "HTTPS"} if cluster.tls else {})}
    served = ([*mounts, {"name": "tls", "mountPath": TLS_DIR, "readOnly": True}] if cluster.tls
              else mounts)
    https = ["--ssl_certfile_path", f"{TLS_DIR}/tls.crt", "--ssl_keyfile_path",
             f"{TLS_DIR}/tls.key"] if cluster.tls else []
    return {
        "metadata": {"name": NAME, "namespace": cluster.namespace, "labels": LABELS,
                     # cluster.py's GatewayRollout waits, and says why a pod does not serve.
                     "annotations": {"pulumi.com/skipAwait": "true"}},
        "spec": {
            "replicas": cluster.replicas,
            "selector": {"matchLabels": GATEWAY_POD_LABELS},
            "strategy": {"type": "RollingUpdate",
                         "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {
                "metadata": {"labels": LABELS,
                             "annotations": {f"spear-fleet/{k}": v for k, v in rollout.items()}},
                "spec": {
                    "securityContext": {"runAsNonRoot": True, "runAsUser": UID,
                                        "runAsGroup": UID},
                    "initContainers": [{
                        "name": "prove-routes", "image": cluster.image,
                        "command": ["python3", "-m", "spear_gateway.prove",
                                    f"{CONFIG_DIR}/{PROOFS_FILE}"],
                        "env": _environment(), "envFrom": credentials, "volumeMounts": mounts,
                        "securityContext": _security(),
                        "terminationMessagePolicy": "FallbackToLogsOnError",
                    }],
                    "containers": [{
                        "name": "litellm", "image": cluster.image,
                        "command": [f"{cluster.venv}/bin/litellm", "--config",
                                    f"{CONFIG_DIR}/config.yaml", "--host", "0.0.0.0",
                                    "--port", str(gateway.port), *https],
                        "env": _environment(), "envFrom": credentials, "volumeMounts": served,
                        "ports": [{"name": "http", "containerPort": gateway.port}],
                        "startupProbe": {"httpGet": {"path": "/health/liveliness", **http},
                                         "periodSeconds": PROBE_PERIOD,
                                         "timeoutSeconds": PROBE_TIMEOUT,
                                         "failureThreshold": STARTUP_SECONDS // PROBE_PERIOD},
                        "livenessProbe": {"httpGet": {"path": "/health/liveliness", **http},
                                          "periodSeconds": 10, "failureThreshold": 3,
                                          "timeoutSeconds": PROBE_TIMEOUT},
                        # Readiness asks the database too: a pod that lost it takes no requests.
                        "readinessProbe": {"httpGet": {"path": "/health/readiness", **http},
                                           "periodSeconds": PROBE_PERIOD, "failureThreshold": 2,
                                           "timeoutSeconds": PROBE_TIMEOUT},
                        "securityContext": _security(),
                    }],
                    "volumes": [{"name": "config", "configMap": {"name": CONFIG_MAP,
                                                                 "items": config_items()}},
                                *([{"name": "tls", "secret": {"secretName": TLS_SECRET}}]
                                  if cluster.tls else [])],
                },
            },
        },
    }


def tls_secret(gateway: Gateway, certificate: Any, key: Any) -> dict[str, Any]:
    """The certificate bundle and its key (Pulumi secrets), where LiteLLM reads them."""
    return {"metadata": {"name": TLS_SECRET, "namespace": gateway.kubernetes.namespace,
                         "labels": LABELS},
            "type": "kubernetes.io/tls", "string_data": {"tls.crt": certificate, "tls.key": key}}


def service(gateway: Gateway) -> dict[str, Any]:
    """One Service for both: its cluster IP for the seats, and with a nodePort every node's
    address for developers outside the cluster."""
    cluster = gateway.kubernetes
    port = {"name": "http", "port": gateway.port, "targetPort": "http"}
    return {
        "metadata": {"name": NAME, "namespace": cluster.namespace, "labels": LABELS},
        "spec": {"selector": {APP_LABEL: NAME},
                 **({"type": "NodePort", "ports": [{**port, "nodePort": cluster.node_port}]}
                    if cluster.node_port else {"ports": [port]}),
                 **({"clusterIP": cluster.service_ip} if cluster.service_ip else {})},
    }


def migration_job(gateway: Gateway, migrate_sh: str) -> dict[str, Any]:
    """migrate.sh against the shared database, once per (image, LiteLLM version, script): the
    name carries them, so a LiteLLM bump is a new Job, run before any pod of the new version."""
    cluster = gateway.kubernetes
    key = digest(f"{cluster.image}\0{gateway.litellm_version}\0{migrate_sh}")[:10]
    return {
        "metadata": {"name": f"{NAME}-migrate-{key}", "namespace": cluster.namespace,
                     "labels": LABELS},
        "spec": {
            "backoffLimit": 2,
            "template": {
                # Not the gateway's app label: the Service must never send a request here.
                "metadata": {"labels": {**LABELS, APP_LABEL: f"{NAME}-migrate"}},
                "spec": {
                    "restartPolicy": "Never",
                    "securityContext": {"runAsNonRoot": True, "runAsUser": UID,
                                        "runAsGroup": UID},
                    "containers": [{
                        "name": "migrate", "image": cluster.image,
                        "command": ["bash", f"{MIGRATE_DIR}/migrate.sh", "--venv", cluster.venv],
                        "env": [{"name": "HOME", "value": "/tmp"}],
                        "envFrom": [{"secretRef": {"name": SECRET}}],
                        "volumeMounts": [{"name": "migrate", "mountPath": MIGRATE_DIR,
                                          "readOnly": True}],
                        "securityContext": _security(),
                    }],
                    "volumes": [{"name": "migrate", "configMap": {"name": MIGRATE_CONFIG_MAP}}],
                },
            },
        },
    }


# ---------------------------------------------------------------------------------------------
# gateway.database.backup in the cluster: the external database dumped by a CronJob into a
# volume that outlives the gateway (a claim, or a folder of a one-node cluster's node), each dump
# encrypted with gatewayBackupKey by the gateway hosts' own script (components/gateway/backup.py).


def backup_key_secret(gateway: Gateway, key: Any) -> dict[str, Any]:
    return {"metadata": {"name": BACKUP, "namespace": gateway.kubernetes.namespace,
                         "labels": LABELS},
            "string_data": {"key": key}, "type": "Opaque"}


def backup_script(gateway: Gateway, script: str) -> dict[str, Any]:
    return {"metadata": {"name": BACKUP, "namespace": gateway.kubernetes.namespace,
                         "labels": LABELS},
            "data": {"backup-database.sh": script}}


def _backup_pod(gateway: Gateway, command: list[str], env: list[dict[str, Any]]) -> dict[str, Any]:
    """A pod of the gateway's image, as its user, with the database URL, the key and the dumps'
    volume."""
    cluster, plan = gateway.kubernetes, gateway.database.backup
    assert isinstance(plan, ClusterBackupPlan)
    volume = ({"hostPath": {"path": plan.host_path, "type": "Directory"}} if plan.host_path
              else {"persistentVolumeClaim": {"claimName": plan.claim}})
    return {
        # Not the gateway's app label: the Service must never send a request here.
        "metadata": {"labels": {**LABELS, APP_LABEL: BACKUP}},
        "spec": {
            "restartPolicy": "Never",
            "securityContext": {"runAsNonRoot": True, "runAsUser": UID, "runAsGroup": UID,
                                "fsGroup": UID},
            "containers": [{
                "name": "backup", "image": cluster.image, "command": command,
                "env": [{"name": "HOME", "value": "/tmp"}, *env],
                "envFrom": [{"secretRef": {"name": SECRET}}],  # DATABASE_URL
                "volumeMounts": [
                    {"name": "backups", "mountPath": BACKUP_DIR},
                    {"name": "key", "mountPath": BACKUP_KEY_DIR, "readOnly": True},
                    {"name": "script", "mountPath": BACKUP_SCRIPT_DIR, "readOnly": True}],
                "securityContext": _security(),
                "terminationMessagePolicy": "FallbackToLogsOnError",
            }],
            "volumes": [{"name": "backups", **volume},
                        {"name": "key", "secret": {"secretName": BACKUP, "defaultMode": 0o400}},
                        {"name": "script", "configMap": {"name": BACKUP}}],
        },
    }


def backup_cron_job(gateway: Gateway, script: str) -> dict[str, Any]:
    """The CronJob; its pod template carries the script's digest, so a new script is used at
    the next run."""
    plan = gateway.database.backup
    assert isinstance(plan, ClusterBackupPlan)
    pod = _backup_pod(gateway, ["sh", f"{BACKUP_SCRIPT_DIR}/backup-database.sh"], [
        {"name": "SPEAR_BACKUP_FOLDER", "value": BACKUP_DIR},
        {"name": "SPEAR_BACKUP_KEEP", "value": str(plan.keep)},
        {"name": "SPEAR_BACKUP_KEY_FILE", "value": BACKUP_KEY_FILE}])
    pod["metadata"]["annotations"] = {"spear-fleet/script-sha256": digest(script)}
    return {"metadata": {"name": BACKUP, "namespace": gateway.kubernetes.namespace,
                         "labels": LABELS},
            "spec": {"schedule": plan.schedule, "concurrencyPolicy": "Forbid",
                     "successfulJobsHistoryLimit": 1, "failedJobsHistoryLimit": 1,
                     "jobTemplate": {"spec": {"backoffLimit": 0, "template": pod}}}}


def restore_job(gateway: Gateway, script: str) -> dict[str, Any]:
    """gateway.database.restoreFrom: the dump loaded into the external database if it holds no
    table yet, before the migrations Job; named by the dump, so another dump is another Job."""
    dump = gateway.database.restore_from
    assert dump is not None
    return {"metadata": {"name": f"{NAME}-restore-{digest(dump)[:10]}",
                         "namespace": gateway.kubernetes.namespace, "labels": LABELS},
            "spec": {"backoffLimit": 0, "template": _backup_pod(
                gateway, ["sh", "-c", f"set -eu\ncd /tmp\n{script}\necho \"restored=$restored\""],
                [])}}
