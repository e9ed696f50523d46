"""The gateway in the fleet's cluster (`gateway.kubernetes`): LiteLLM as a Deployment of two or
more replicas on one external PostgreSQL, instead of on a gateway host. The cookbook's gateway
"is stateless apart from Postgres and scales horizontally"; the budgets hold across replicas
because spear-fleet's ledger (hosts/gateway/spear_gateway/pg_store.py) is in that database.

Each part is a Kubernetes object whose diff is the upgrade a reviewer sees
(components/gateway/cluster_manifests.py renders them): config.yaml and the hook package in a
ConfigMap, every credential in a Secret, migrate.sh as a Job named by (image, version, script)
that runs before any pod of a new version, the Deployment (rolled by the digests of what it
reads and by each fleet track's generation), and a Service. The fleet's tracks are routes at
their Services' cluster IPs, proven by each new pod before it serves (its init container); the
developers' keys and smoke tests go through the API server's proxy to the gateway's Service
(components/hostops/kube_api.py), so `up` needs no address of the cluster's network.
"""

from __future__ import annotations

import json
import posixpath
import urllib.parse
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from pulumi.dynamic import ReadResult

from components.gateway import cluster_manifests as manifests
from components.gateway.access import DeveloperAccess, GatewayArgs
from components.gateway.backup import rendered_script, restore_script
from components.gateway.render import (DATABASE_URL_ENV, FRONTIER_KEY_ENV, HOSTS_DIR, config_facts,
                                       hatch_outputs,
                                       MASTER_KEY_ENV, hooks_digest, render_config,
                                       upstream_key_env)
from components.hostops.host_resource import HostProvider, HostResource
from components.hostops.kube_api import KubeApi
from components.hostops.remote_file import content_digest
from components.hostops.ssh import RemoteError, tail
from components.hostops.waiting import wait_until
from components.vllm_fleet.monitoring import GatewayTarget
from config.types import Gateway as GatewayConfig
from review.kinds import CONFIG_ONLY, Kind
from spear import tokens
from spear.rules import FLEET_UPSTREAM, GATEWAY_FACTS_ANNOTATION, GATEWAY_POD_LABELS

MIGRATE_SH = HOSTS_DIR / "migrate.sh"
# LiteLLM reads a key from this header before Authorization, which the API server's proxy drops.
KEY_HEADER = "x-litellm-api-key"


def metrics_target(config: GatewayConfig) -> GatewayTarget:
    """Where the fleet's Prometheus reads an in-cluster gateway's /metrics/: its pods, by their
    labels, over TLS when it serves TLS."""
    tls = config.kubernetes.tls
    return GatewayTarget(namespace=config.kubernetes.namespace, pod_labels=GATEWAY_POD_LABELS,
                         tls_name=tls.name if tls else None, root_pem=tls.root_pem if tls else None)


class ClusterGateway(pulumi.ComponentResource):
    """The gateway as a Deployment in the fleet's cluster (gateway.kubernetes)."""

    def __init__(self, name: str, args: GatewayArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(tokens.GATEWAY, name, None, opts)
        cfg, fleet = args.config, args.fleet
        place = cfg.kubernetes
        on_cluster = pulumi.ResourceOptions(parent=self, provider=fleet.provider)

        def after(*resources: pulumi.Resource, **extra: Any) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(
                depends_on=list(resources), **extra))

        self.namespace = k8s.core.v1.Namespace(
            f"{name}-namespace", metadata={"name": place.namespace, "labels": manifests.LABELS},
            opts=on_cluster)
        env: dict[str, pulumi.Input[str]] = {
            MASTER_KEY_ENV: args.master_key, FRONTIER_KEY_ENV: args.frontier_api_key,
            DATABASE_URL_ENV: args.database_url, **fleet.environment()}
        self.secret = k8s.core.v1.Secret(
            f"{name}-credentials",
            metadata={"name": manifests.SECRET, "namespace": place.namespace,
                      "labels": manifests.LABELS},
            string_data={k: pulumi.Output.secret(v) for k, v in env.items()}, type="Opaque",
            opts=after(self.namespace))
        served = [self.secret]
        if place.tls:
            served.append(k8s.core.v1.Secret(
                f"{name}-tls", **manifests.tls_secret(cfg, pulumi.Output.secret(args.tls_certificate),
                                                      pulumi.Output.secret(args.tls_key)),
                opts=after(self.namespace)))
        # What every pod proves before it serves: each fleet route, with the key it demands.
        routes = pulumi.Output.all(*fleet.routes())
        config_text = routes.apply(lambda rs: render_config(cfg, list(rs),
                                                            fleet.cache_salt_scope))
        proofs = routes.apply(lambda rs: [
            {"route": r.endpoint, "api_base": r.api_base, "served_model": r.served_model,
             "key_env": upstream_key_env(r.endpoint)} for r in rs])
        self.config = k8s.core.v1.ConfigMap(
            f"{name}-config",
            metadata={"name": manifests.CONFIG_MAP, "namespace": place.namespace,
                      "labels": manifests.LABELS,
                      # For policies and reviewers, as the gateway host's config file has them.
                      "annotations": {GATEWAY_FACTS_ANNOTATION: json.dumps(
                          config_facts(cfg, [FLEET_UPSTREAM]), sort_keys=True)}},
            data=pulumi.Output.all(config_text, proofs).apply(
                lambda cp: manifests.config_data(cp[0], cp[1])),
            opts=after(self.namespace))
        migrate_sh = MIGRATE_SH.read_text()
        self.migrate_script = k8s.core.v1.ConfigMap(
            f"{name}-migrate-script",
            metadata={"name": manifests.MIGRATE_CONFIG_MAP, "namespace": place.namespace,
                      "labels": manifests.LABELS},
            data={"migrate.sh": migrate_sh}, opts=after(self.namespace))
        self.backup = self._backup(name, cfg, args, after)
        # pulumi-kubernetes waits for the Job to complete (and fails the `up` when it fails).
        self.migrations = k8s.batch.v1.Job(
            f"{name}-migrations", **manifests.migration_job(cfg, migrate_sh),
            opts=after(self.secret, self.migrate_script, *self.backup[-1:]))

        # Pod-template annotations: a change of any rolls the pods, each proving its routes anew.
        rollout = {
            "config": config_text.apply(manifests.digest),
            "hooks": hooks_digest(),
            "credentials": pulumi.Output.secret(pulumi.Output.all(**env)).apply(
                lambda values: content_digest(repr(sorted(values.items())))),
            **{f"track-{t.name}": pulumi.Output.from_input(t.generation).apply(str)
               for t in fleet.tracks},
            # LiteLLM reads its certificate once, at its start.
            **({"tls": pulumi.Output.secret(pulumi.Output.all(args.tls_certificate, args.tls_key))
                .apply(lambda pair: content_digest("\0".join(pair)))} if place.tls else {}),
        }
        self.deployment = k8s.apps.v1.Deployment(
            f"{name}-deployment", **manifests.deployment(cfg, rollout),
            opts=after(self.migrations, self.config, *served,
                       *[r for t in fleet.tracks for r in t.after]))
        self.service = k8s.core.v1.Service(
            f"{name}-service", **manifests.service(cfg),
            # A fixed name (and perhaps a fixed cluster IP): a replacement deletes the old first.
            opts=after(self.namespace, delete_before_replace=True))

        cluster = pulumi.Output.secret(pulumi.Output.from_input(fleet.cluster)).apply(
            lambda access: {**access, "namespace": place.namespace, "service": manifests.NAME,
                            "key_header": KEY_HEADER, "scheme": "https" if place.tls else "http"})
        self.rollout = GatewayRollout(f"{name}-rollout", cluster, self.deployment, place.replicas,
                                      pulumi.ResourceOptions(parent=self,
                                                             depends_on=[self.deployment]))
        # With TLS, the name the certificate holds, which developers' DNS (to a node, at the
        # nodePort) and the seats' host aliases (to the cluster IP, at the port) resolve; else
        # the Service's name in the cluster's DNS.
        in_cluster = (f"https://{place.tls.name}:{cfg.port}" if place.tls else
                      f"http://{manifests.NAME}.{place.namespace}.svc.cluster.local:{cfg.port}")
        url = f"https://{place.tls.name}:{place.node_port}" if place.node_port else in_cluster
        self.access = DeveloperAccess.make(
            self, name, vantage={"connection": None, "cluster": cluster}, address=manifests.NAME,
            port=cfg.port, url=url, master_key=args.master_key,
            database=pulumi.Output.secret(args.database_url).apply(content_digest),
            developers=args.developers, route_tracks=fleet.route_tracks(),
            harnesses=args.harnesses, started_at=self.rollout.generation,
            after=[self.rollout, self.service], root_pem=place.tls.root_pem if place.tls else None)
        self.harnesses = self.access.harnesses
        # Where the cluster's own pods (the agent seats) reach it: by its TLS name, which their
        # host aliases resolve to the fixed cluster IP; without TLS (and so without seats), the
        # fixed cluster IP when the stack gives one, since a cluster without DNS resolves no
        # Service name.
        self.pod_url = (in_cluster if place.tls or not place.service_ip
                        else f"http://{place.service_ip}:{cfg.port}")

        self.outputs: dict[str, Any] = {
            "url": url,
            "placement": "kubernetes",
            "namespace": place.namespace,
            "ready_replicas": self.rollout.ready_replicas,
            "image": place.image,
            "litellm_version": cfg.litellm_version,
            "upstreams": [FLEET_UPSTREAM],
            "cluster_ip": self.service.spec.cluster_ip,
            "migrations": self.migrations.metadata.name,
            "database": "external",
            "hatch": hatch_outputs(cfg.hatch),
            # What a developer's harness trusts to reach `url` (docs/OPERATING.md, "Agent seats").
            **({"tls": {"name": place.tls.name, "root": place.tls.root_pem}} if place.tls else {}),
            **self.access.outputs(),
        }
        self.register_outputs(self.outputs)

    def _backup(self, name: str, cfg: GatewayConfig, args: GatewayArgs,
                after: Any) -> list[pulumi.Resource]:
        """gateway.database.backup: its key, its script and the CronJob; with restoreFrom, the
        restore Job, which the migrations wait for (last in the list)."""
        plan = cfg.database.backup if cfg.database else None
        if plan is None:
            return []
        script = rendered_script()
        key = k8s.core.v1.Secret(f"{name}-backup-key", **manifests.backup_key_secret(
            cfg, pulumi.Output.secret(args.backup_key)), opts=after(self.namespace))
        script_map = k8s.core.v1.ConfigMap(f"{name}-backup-script",
                                           **manifests.backup_script(cfg, script),
                                           opts=after(self.namespace))
        made: list[pulumi.Resource] = [key, script_map, k8s.batch.v1.CronJob(
            f"{name}-backup", **manifests.backup_cron_job(cfg, script),
            opts=after(self.secret, key, script_map))]
        if cfg.database.restore_from:
            restore = restore_script(posixpath.join(manifests.BACKUP_DIR, cfg.database.restore_from),
                                     manifests.BACKUP_KEY_FILE, 'psql "$DATABASE_URL"',
                                     'pg_restore --dbname="$DATABASE_URL" --no-owner',
                                     "in the backups' volume")
            made.append(k8s.batch.v1.Job(f"{name}-restore", **manifests.restore_job(cfg, restore),
                                         opts=after(self.secret, key)))
        return made


# ---------------------------------------------------------------------------------------------
# Waiting for the gateway's rollout: pulumi-kubernetes would wait for it too, but only report a
# timeout; a pod whose proof failed (or whose LiteLLM exits) fails the `up` at once with why.

ROLLOUT_POLL_SECONDS = 3.0
# A container waiting for one of these will not start by waiting longer.
STUCK = ("ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName",
         "CrashLoopBackOff", "CreateContainerConfigError", "CreateContainerError",
         "RunContainerError")


class RolloutFailed(RemoteError):
    pass


def _pod_problem(api: KubeApi, namespace: str, pod: dict[str, Any]) -> str | None:
    """Why a pod of the new rollout will not become ready, or None while it may still."""
    name = pod["metadata"]["name"]
    status = pod.get("status") or {}
    for container in status.get("initContainerStatuses") or []:
        for state in (container.get("state") or {}, container.get("lastState") or {}):
            ended = state.get("terminated")
            if ended and ended.get("exitCode"):
                return (f"gateway pod {name}: {container['name']} failed:"
                        f" {(ended.get('message') or ended.get('reason') or '').strip()}")
    for container in [*(status.get("initContainerStatuses") or []),
                      *(status.get("containerStatuses") or [])]:
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in STUCK:
            code, _, log = api.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}/log"
                                       f"?container={container['name']}&previous=true"
                                       "&tailLines=15")
            said = f"\n{tail(log.decode(errors='replace'), 15)}" if code == 200 else ""
            return (f"gateway pod {name}: {container['name']} {waiting['reason']}:"
                    f" {waiting.get('message', '')}{said}")
    return None


class GatewayRolloutProvider(HostProvider):
    update_fields = ("generation", "replicas", "template")

    def resource_id(self, props: dict[str, Any]) -> str:
        return f"{props['cluster']['namespace']}/{props['deployment']}"

    def apply(self, props: dict[str, Any], olds: dict[str, Any] | None) -> dict[str, Any]:
        api = KubeApi(props["cluster"])
        namespace, name = props["cluster"]["namespace"], props["deployment"]
        replicas = int(props["replicas"])
        base = f"/apis/apps/v1/namespaces/{namespace}"
        selector = urllib.parse.quote(f"{manifests.APP_LABEL}={manifests.NAME}")
        status: dict[str, Any] = {}

        def rolled_out() -> bool:
            nonlocal status
            _, _, raw = api.request("GET", f"{base}/deployments/{name}")
            deployment = json.loads(raw)
            status = deployment.get("status") or {}
            if status.get("observedGeneration", 0) >= int(props["generation"]) and all(
                    status.get(k) == replicas for k in ("replicas", "updatedReplicas",
                                                        "readyReplicas", "availableReplicas")):
                return True
            revision = (deployment["metadata"].get("annotations") or {}).get(REVISION)
            _, _, raw = api.request("GET", f"{base}/replicasets?labelSelector={selector}")
            newest = [rs["metadata"]["labels"].get("pod-template-hash")
                      for rs in json.loads(raw).get("items") or []
                      if (rs["metadata"].get("annotations") or {}).get(REVISION) == revision]
            _, _, raw = api.request("GET", f"/api/v1/namespaces/{namespace}/pods?labelSelector="
                                    f"{selector}")
            for pod in json.loads(raw).get("items") or []:
                if pod["metadata"].get("labels", {}).get("pod-template-hash") in newest \
                        and (problem := _pod_problem(api, namespace, pod)):
                    raise RolloutFailed(f"{problem}\n(the pods before this rollout go on serving"
                                        " the routes they proved)")
            return False

        if wait_until(rolled_out, float(props["timeout_seconds"]), ROLLOUT_POLL_SECONDS):
            return {**props, "ready_replicas": replicas}
        raise RolloutFailed(f"gateway Deployment {namespace}/{name}: not rolled out in"
                            f" {props['timeout_seconds']} s: {json.dumps(status)}")

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return ReadResult(id_=id_, outs=dict(props))  # a wait leaves nothing behind

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        return None


REVISION = "deployment.kubernetes.io/revision"  # the Deployment controller's own annotation


KIND = Kind.of(tokens.GATEWAY_ROLLOUT, "gateway rollout", CONFIG_ONLY, meanings={
    CONFIG_ONLY: "waits until every gateway pod proved its fleet routes and is ready; a failed"
                 " proof fails the update, the old pods serve on"})

class GatewayRollout(HostResource, module=tokens.DYNAMIC_MODULE,
                     name=tokens.GATEWAY_ROLLOUT.name):
    ready_replicas: pulumi.Output[int]
    generation: pulumi.Output[int]

    def __init__(self, name: str, cluster: pulumi.Input[dict], deployment: k8s.apps.v1.Deployment,
                 replicas: int, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(GatewayRolloutProvider(), name, {
            "connection": None, "cluster": cluster, "deployment": manifests.NAME,
            "generation": deployment.metadata.generation, "replicas": replicas,
            # Known at preview, so the preview says the gateway rolls.
            "template": deployment.spec.template.metadata.annotations,
            "timeout_seconds": manifests.ROLLOUT_TIMEOUT_SECONDS,
        }, opts, outputs=("ready_replicas",))
