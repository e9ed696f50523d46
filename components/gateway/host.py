"""The gateway on a host (components/gateway/__init__.py has both placements): LiteLLM between
every developer and the fleet, on a host spear-fleet logs in to, with PostgreSQL for keys and
spend.

Each part is its own resource so that its diff is the upgrade a reviewer sees: a LiteLLM version
bump replaces the install (new venv), applies only the new migrations and restarts the proxy; a
config change rewrites config.yaml and restarts, nothing else moves; a new upstream adds a
tunnel unit and a route. The Kubernetes fleet's tracks are routes at their Services' cluster IPs
(no tunnel: the gateway host reaches them as a node does), each proven from the gateway host
(components/endpoints/proof.py) after every rollout of its track and before its route is added.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

import pulumi
import yaml

from components.endpoints.proof import EndpointProof, EndpointProofArgs, prove_endpoint
from components.gateway.access import DeveloperAccess, GatewayArgs, fleet_route
from components.gateway.backup import DatabaseBackup, DatabaseBackupArgs
from components.gateway.backup import render_units as render_backup_units
from components.gateway.database import (CLUSTER, PG_VERSION, LocalDatabase, LocalDatabaseArgs,
                                         MigrationsArgs, applied, run_migrations)
from components.gateway.install import LitellmInstall, LitellmInstallArgs
from components.gateway.offline_engine import bundle_key
from components.gateway.render import (DATABASE_URL_ENV, FRONTIER_KEY_ENV, HOOK_FILES,
                                       MASTER_KEY_ENV, Route, config_facts, hatch_outputs,
                                       hooks_digest, render_config, render_env,
                                       render_tunnel_unit, render_unit, upstream_key_env)
from components.gateway.render import tls_files as render_tls_files
from components.hostops.host_key import pinned_connection
from components.hostops.known_hosts import known_hosts_line
from components.hostops.remote_file import RemoteFile, RemoteFileArgs, content_digest
from components.hostops.ssh import connection_input
from components.hostops.systemd_unit import (HealthCheck, SystemdUnit, SystemdUnitArgs, unit_details,
                                            unit_name)
from components.vllm_fleet.monitoring import GatewayTarget
from components.vllm_fleet.throughput import FleetThroughput, FleetThroughputArgs
from config.types import EXTERNAL_DATABASE, OFFLINE_ENGINE
from config.types import Gateway as GatewayConfig
from review.kinds import (CONFIG_ONLY, CREATE, DELETE, UNKNOWN, Change, Kind, changed_keys,
                          mapping_details, updates_only)
from spear import tokens
from spear.rules import FLEET_UPSTREAM, GATEWAY_UNIT, SYSTEM_SLICE, tunnel_unit


def _flatten(value: Any, path: str = "") -> dict[str, Any]:
    if isinstance(value, Mapping):
        return {k: v for key, item in value.items()
                for k, v in _flatten(item, f"{path}.{key}" if path else str(key)).items()}
    if isinstance(value, list):
        return {k: v for i, item in enumerate(value) for k, v in _flatten(item, f"{path}[{i}]").items()}
    return {path: value}


@updates_only
def _config_yaml_details(change: Change) -> list[str]:
    """The settings config.yaml changes (it holds no secret: credentials are os.environ/<NAME>)."""
    old, new = change.old, change.new
    if old.get("content") == new.get("content"):
        return [f"`{k}` changed" for k in changed_keys(old, new) if k != "content"]
    if UNKNOWN in (old.get("content"), new.get("content")):
        return ["config.yaml changed (known after the update)"]
    before, after = (_flatten(yaml.safe_load(s.get("content") or "") or {}) for s in (old, new))
    return mapping_details(before, after) or ["config.yaml changed"]


def _config_line(change: Change) -> str | None:
    if change.change != CONFIG_ONLY or change.old.get("content") == change.new.get("content"):
        return None
    settings = [d.split("`")[1] for d in _config_yaml_details(change) if "`" in d]
    return ("gateway: config.yaml changed" + (f" ({', '.join(settings)})" if settings else "")
            + ": restart only")


def _tunnel_line(change: Change) -> str | None:
    unit = change.inputs.get("unit")
    endpoint = str(unit).removeprefix("spear-tunnel-").removesuffix(".service")
    if change.change == CREATE:
        return f"gateway: new upstream {endpoint} ({unit}; the proxy restarts)"
    return f"gateway: upstream {endpoint} removed ({unit} stops)" if change.change == DELETE else None


KINDS = (
    Kind.of(tokens.GATEWAY_CONFIG, "gateway config.yaml", CONFIG_ONLY,
            details=_config_yaml_details, gateway_line=_config_line, meanings={
        CONFIG_ONLY: "rewrites config.yaml; the proxy restarts, nothing is reinstalled"}),
    Kind.of(tokens.GATEWAY_ENV, "gateway env file", CONFIG_ONLY, meanings={
        CONFIG_ONLY: "rewrites the env file (secrets, not shown); the proxy restarts"}),
    Kind.of(tokens.GATEWAY_HOOK_FILE, "gateway hook file", CONFIG_ONLY),
    Kind.of(tokens.GATEWAY_TLS_FILE, "gateway TLS file", CONFIG_ONLY, meanings={
        CONFIG_ONLY: "rewrites the HTTPS listener's certificate or key (not shown); the proxy"
                     " restarts"}),
    Kind.of(tokens.TUNNEL_KEY, "tunnel key", CONFIG_ONLY),
    Kind.of(tokens.TUNNEL_KNOWN_HOSTS, "tunnel known_hosts", CONFIG_ONLY),
    Kind.of(tokens.GATEWAY_TUNNEL, unit_name, CONFIG_ONLY, details=unit_details, restarts=True,
            gateway_line=_tunnel_line),
    Kind.of(tokens.GATEWAY_SERVICE, unit_name, CONFIG_ONLY, details=unit_details, restarts=True),
)


class GatewayConfigFile(RemoteFile, module=tokens.DYNAMIC_MODULE, name=tokens.GATEWAY_CONFIG.name):
    """<runtime>/config/config.yaml: routes, the hatch, settings; no secrets."""


class GatewayEnv(RemoteFile, module=tokens.DYNAMIC_MODULE, name=tokens.GATEWAY_ENV.name):
    """<runtime>/config/gateway.env (0600): the master key, the provider keys, the database URL."""


class GatewayHookFile(RemoteFile, module=tokens.DYNAMIC_MODULE,
                      name=tokens.GATEWAY_HOOK_FILE.name):
    """One file of the hook package LiteLLM loads (hosts/gateway/spear_gateway, spear/rules.py)."""


class TunnelKey(RemoteFile, module=tokens.DYNAMIC_MODULE, name=tokens.TUNNEL_KEY.name):
    """<runtime>/tunnels/<endpoint>.key (0600): the key the tunnel logs in to the endpoint with."""


class TunnelKnownHosts(RemoteFile, module=tokens.DYNAMIC_MODULE,
                       name=tokens.TUNNEL_KNOWN_HOSTS.name):
    """<runtime>/tunnels/<endpoint>.known_hosts: the host key the endpoint's host must present to
    the tunnel's ssh (public: no secret)."""


class GatewayTlsFile(RemoteFile, module=tokens.DYNAMIC_MODULE, name=tokens.GATEWAY_TLS_FILE.name):
    """<runtime>/tls/gateway.crt and gateway.key (0600): what gateway.listen.tls serves."""


class GatewayTunnel(SystemdUnit, module=tokens.DYNAMIC_MODULE, name=tokens.GATEWAY_TUNNEL.name):
    """spear-tunnel-<endpoint>.service: the endpoint's server on this host's loopback."""


class GatewayService(SystemdUnit, module=tokens.DYNAMIC_MODULE, name=tokens.GATEWAY_SERVICE.name):
    """spear-gateway.service: the LiteLLM proxy."""


def metrics_target(config: GatewayConfig) -> GatewayTarget:
    """Where the fleet's Prometheus reads a gateway host's /metrics/: its address and port."""
    return GatewayTarget(address=f"{config.host}:{config.port}")


class HostGateway(pulumi.ComponentResource):
    """The gateway on a host spear-fleet logs in to (gateway.ssh)."""

    def __init__(self, name: str, args: GatewayArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(tokens.GATEWAY, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        cfg = args.config
        runtime = cfg.runtime_dir
        listener = cfg.tls_listener  # gateway.listen.tls: HTTPS beyond loopback
        self.host_key, connection = pinned_connection(
            name, pulumi.Output.secret(connection_input(cfg.ssh.host, cfg.ssh.port, cfg.ssh.user,
                                                        args.private_key)),
            f"{cfg.ssh.user}@{cfg.ssh.address}", cfg.ssh.host_key, child)
        local_db = cfg.database.location != EXTERNAL_DATABASE

        offline = cfg.database.query_engine == OFFLINE_ENGINE
        self.install = LitellmInstall(f"{name}-litellm", LitellmInstallArgs(
            connection=connection, gateway=cfg,
            bundle_key=bundle_key() if offline else None), child)

        backup = cfg.database.backup
        self.database = LocalDatabase(f"{name}-postgresql", LocalDatabaseArgs(
            connection=connection, runtime_dir=runtime, port=cfg.database.port,
            restore_from=posixpath.join(backup.folder, cfg.database.restore_from)
            if backup and cfg.database.restore_from else None,
            restore_key=args.backup_key if backup and cfg.database.restore_from else None),
            child) if local_db else None
        self.backup = DatabaseBackup(f"{name}-backup", DatabaseBackupArgs(
            connection=connection, runtime_dir=runtime, on_calendar=backup.on_calendar,
            folder=backup.folder, key=args.backup_key, units=render_backup_units(
                backup, runtime, cfg.database.port, f"postgresql@{PG_VERSION}-{CLUSTER}.service")),
            pulumi.ResourceOptions(parent=self, depends_on=[self.database])
        ) if self.database and backup else None

        # The tunnels: each upstream's server on this host's loopback, at its backend's port.
        tunnels: list[SystemdUnit] = []
        routes: list[Route] = []
        env: dict[str, pulumi.Input[str]] = {MASTER_KEY_ENV: args.master_key,
                                             FRONTIER_KEY_ENV: args.frontier_api_key}
        if args.database_url is not None:
            env[DATABASE_URL_ENV] = args.database_url
        for endpoint, upstream in args.upstreams.items():
            reach, port = upstream.reach, upstream.backend.port
            key_file = TunnelKey(f"{name}-tunnel-{endpoint}-key", RemoteFileArgs(
                connection=connection,
                path=posixpath.join(runtime, "tunnels", f"{endpoint}.key"),
                content=pulumi.Output.secret(reach.private_key), mode=0o600, secret=True,
            ), child)
            # The key the endpoint's host must present, for the tunnel's ssh (strict checking).
            known_hosts = TunnelKnownHosts(f"{name}-tunnel-{endpoint}-known-hosts", RemoteFileArgs(
                connection=connection,
                path=posixpath.join(runtime, "tunnels", f"{endpoint}.known_hosts"),
                content=pulumi.Output.all(reach.ssh_host, reach.ssh_port, reach.host_key).apply(
                    lambda hpk: known_hosts_line(hpk[0], int(hpk[1]), hpk[2])),
            ), child)
            unit_text = pulumi.Output.all(reach.ssh_host, reach.ssh_port).apply(
                lambda hp, e=endpoint, r=reach, p=port: render_tunnel_unit(
                    cfg, e, hp[0], hp[1], r.ssh_user, r.address, r.port, p))
            tunnels.append(GatewayTunnel(f"{name}-tunnel-{endpoint}", SystemdUnitArgs(
                connection=connection,
                unit=tunnel_unit(endpoint),
                content=unit_text,
                slice=SYSTEM_SLICE,
                # Through the tunnel: the endpoint's own health answers only when it forwards.
                health=HealthCheck(port=port, timeout_seconds=120),
                restart_triggers={"key": key_file.digest, "host_key": known_hosts.digest},
            ), pulumi.ResourceOptions(parent=self,
                                      depends_on=[key_file, known_hosts, upstream])))
            routes.append(pulumi.Output.from_input(reach.served_model).apply(
                lambda model, e=endpoint, r=reach, p=port: Route.tunnel(e, p, model, r.api_key is not None)))
            if reach.api_key is not None:
                env[upstream_key_env(endpoint)] = reach.api_key

        # The fleet's tracks: proven from this host, at the address the route will use, after
        # every change of the track's pods; the route is written only once its proof passed.
        self.fleet_proofs: dict[str, EndpointProof] = {}
        # And each track's throughput, re-measured when its pair changes.
        self.fleet_throughput: dict[str, FleetThroughput] = {}
        fleet = args.fleet
        for track in (fleet.tracks if fleet else []):
            route = fleet_route(track.name)
            self.fleet_proofs[track.name] = prove_endpoint(f"{name}-{route}", EndpointProofArgs(
                endpoint=route, connection=connection, port=track.port,
                served_model=track.served_model, address=track.address, api_key=fleet.api_key,
                triggers={"pair": track.pair, "generation": track.generation},
                settle_seconds=track.settle_seconds,
            ), pulumi.ResourceOptions(parent=self, depends_on=track.after))
            self.fleet_throughput[track.name] = FleetThroughput(
                f"{name}-{route}-throughput", FleetThroughputArgs(
                    connection=connection, address=track.address, port=track.port,
                    model=track.served_model, max_model_len=track.max_model_len,
                    pair=track.pair, api_key=fleet.api_key,
                    min_ratio=track.throughput_min_ratio),
                pulumi.ResourceOptions(parent=self,
                                       depends_on=[self.fleet_proofs[track.name].smoke_test]))
        if fleet:
            routes.extend(fleet.routes())
            env.update(fleet.environment())
        proofs = [r for p in self.fleet_proofs.values() for r in (p.verification, p.smoke_test)]
        upstream_names = [*args.upstreams, *([FLEET_UPSTREAM] if fleet else [])]

        config_text = pulumi.Output.all(*routes).apply(lambda rs: render_config(
            cfg, list(rs), fleet.cache_salt_scope if fleet else "team"))
        self.config_file = GatewayConfigFile(f"{name}-config", RemoteFileArgs(
            connection=connection,
            path=posixpath.join(runtime, "config", "config.yaml"),
            content=config_text,
            # For policies and reviewers: what `coder` routes to and what the hatch may spend.
            facts={**config_facts(cfg, upstream_names),
                   "binds": [{"host": cfg.ssh.address, "address": cfg.host, "port": cfg.port,
                              "what": "the LiteLLM gateway"},
                             *([{"host": cfg.ssh.address, "address": listener.address,
                                 "port": listener.port, "what": "the LiteLLM gateway's HTTPS"}]
                               if listener else [])]},
        ), pulumi.ResourceOptions(parent=self, depends_on=proofs))
        env_text = pulumi.Output.secret(pulumi.Output.all(**env).apply(render_env))
        self.env_file = GatewayEnv(f"{name}-env", RemoteFileArgs(
            connection=connection, path=posixpath.join(runtime, "config", "gateway.env"),
            content=env_text, mode=0o600, secret=True), child)
        # gateway.listen.tls: the certificate bundle and key its HTTPS listener serves.
        tls_files = [GatewayTlsFile(f"{name}-tls-{posixpath.basename(path).replace('.', '-')}",
                                    RemoteFileArgs(connection=connection, path=path,
                                                   content=pulumi.Output.secret(pem), mode=0o600,
                                                   secret=True), child)
                     for path, pem in zip(render_tls_files(cfg), (args.tls_certificate,
                                                                  args.tls_key))] \
            if listener else []
        hook_files = [GatewayHookFile(f"{name}-hook-{remote.replace('/', '-').replace('.py', '')}",
                                      RemoteFileArgs(
                                          connection=connection,
                                          path=posixpath.join(runtime, "config", remote),
                                          content=local.read_text()), child)
                      for remote, local in HOOK_FILES.items()]

        # Which records the database holds: new ones mean new keys (a restored dump keeps its own).
        database = (pulumi.Output.all(self.database.records_id, self.database.system_id).apply(
            lambda ids: ids[0] or ids[1]) if self.database else
                    pulumi.Output.secret(args.database_url).apply(content_digest))
        self.migrations = run_migrations(f"{name}-migrations", MigrationsArgs(
            connection=connection, runtime_dir=runtime, install_key=self.install.install_key,
            litellm_version=cfg.litellm_version, database=database,
        ), pulumi.ResourceOptions(parent=self, depends_on=[
            self.install, self.env_file, *([self.database] if self.database else [])]))

        self.service = GatewayService(f"{name}-service", SystemdUnitArgs(
            connection=connection,
            unit=GATEWAY_UNIT,
            content=render_unit(cfg, [tunnel_unit(e) for e in args.upstreams]),
            slice=SYSTEM_SLICE,
            # LiteLLM's liveness answers once the proxy (and its Prisma client) is up: 40-70 s.
            health=HealthCheck(port=cfg.port, address=cfg.host, path="/health/liveliness",
                               timeout_seconds=600),
            # Known at preview, so the preview says what restarts the proxy.
            restart_triggers={
                "install_key": self.install.install_key,
                "config": config_text.apply(content_digest),
                "env": self.env_file.digest,
                "hooks": hooks_digest(),
                **{f"tls-{i}": tls_file.digest for i, tls_file in enumerate(tls_files)},
            },
        ), pulumi.ResourceOptions(parent=self, depends_on=[
            self.migrations, self.config_file, *hook_files, *tunnels, *tls_files,
            *([self.database] if self.database else [])]))

        # One key per developer, then the seed's smoke test through the gateway with each key:
        # every developer leaves `up` with a key that works. The keys and the smoke tests ask on
        # loopback; developers and seats are wired to the HTTPS listener by name when there is one.
        url = (f"https://{listener.tls.name}:{listener.port}" if listener
               else f"http://{cfg.host}:{cfg.port}")
        self.access = DeveloperAccess.make(
            self, name, vantage={"connection": connection}, address=cfg.host, port=cfg.port,
            url=url, master_key=args.master_key, database=database, developers=args.developers,
            route_tracks={**{endpoint: None for endpoint in args.upstreams},
                          **(fleet.route_tracks() if fleet else {})},
            harnesses=args.harnesses, started_at=self.service.started_at, after=[self.service],
            root_pem=listener.tls.root_pem if listener else None)
        self.harnesses = self.access.harnesses

        # A pod reaches it by name at its HTTPS listener (the sandbox allows exactly that).
        self.pod_url = url
        self.outputs: dict[str, Any] = {
            "url": url,
            "ssh_host_key": self.host_key.outputs(),
            "litellm_version": self.install.installed_version,
            "upstreams": upstream_names,
            "fleet_routes": {track: {"verified": proof.verification.passed,
                                     "smoke_test": proof.smoke_test.summary,
                                     "throughput": self._throughput(track)}
                             for track, proof in self.fleet_proofs.items()},
            # migrate.sh's summary, a count (its output is a secret: Prisma's errors can name the
            # database).
            "migrations_applied": pulumi.Output.unsecret(self.migrations.stdout.apply(applied)),
            "database": "local" if local_db else "external",
            **({"database_backup": {"folder": backup.folder, "first_dump": self.backup.first_dump,
                                    "dumps": self.backup.dumps,
                                    "restored": self.database.restored}} if self.backup else {}),
            "hatch": hatch_outputs(cfg.hatch),
            # What a developer's harness trusts to reach `url` (docs/OPERATING.md, "Agent seats").
            **({"tls": {"name": listener.tls.name, "root": listener.tls.root_pem,
                        "address": listener.address}} if listener else {}),
            **self.access.outputs(),
        }
        self.register_outputs(self.outputs)

    def _throughput(self, track: str) -> dict[str, pulumi.Output[Any]]:
        measured = self.fleet_throughput[track]
        return {"prefill_tokens_per_second": measured.prefill_tokens_per_second,
                "decode_tokens_per_second": measured.decode_tokens_per_second,
                "previous": measured.previous, "ratios": measured.ratios}

