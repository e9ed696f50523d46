"""The SPEAR inference host: llama-server built on the host, its model, its config, its launcher,
the spear-inference system unit, and the checks that prove them together: the seed's smoke
test and the cookbook's endpoint verification (model list, completion, tool call).

Each part is its own resource so that its diff is the upgrade: a new llama.cpp pin replaces the
build; a new model manifest re-verifies (and fetches) the shards; a changed setting rewrites
server.conf. Any of those restarts the service; only the first rebuilds.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any

import pulumi

from components.endpoints.proof import EndpointProofArgs, prove_endpoint
from components.endpoints.reach import Reach
from components.hostops.host_key import pinned_connection
from components.hostops.remote_file import RemoteFile, RemoteFileArgs, content_digest
from components.hostops.ssh import connection_input
from components.hostops.systemd_unit import HealthCheck, SystemdUnit, SystemdUnitArgs
from components.inference_host.llama_server_build import (LlamaServerBuild, LlamaServerBuildArgs,
                                                          build_key, source_input)
from components.inference_host.model_files import (ModelFiles, ModelFilesArgs, manifest_digest,
                                                   manifest_input)
from components.inference_host.render import (SERVE_SH, command_line, render_server_conf,
                                              render_unit, server_conf_settings)
from config.types import InferenceHost as HostConfig
from review.kinds import CONFIG_ONLY, Change, Kind, mapping_details, updates_only
from spear import tokens
from spear.rules import INFERENCE_UNIT, SYSTEM_SLICE


def _settings_details(change: Change) -> list[str]:
    old, new = change.old, change.new
    lines = mapping_details(old.get("settings") or {}, new.get("settings") or {})
    return lines or (["content changed"] if old.get("content") != new.get("content") else [])


KINDS = (
    Kind.of(tokens.SERVER_CONF, "server.conf", CONFIG_ONLY, details=updates_only(_settings_details),
            meanings={CONFIG_ONLY: "rewrites server.conf; nothing is rebuilt"}),
    Kind.of(tokens.LAUNCHER, "serve.sh", CONFIG_ONLY,
            meanings={CONFIG_ONLY: "rewrites serve.sh; nothing is rebuilt"}),
)

class ServerConf(RemoteFile, module=tokens.DYNAMIC_MODULE, name=tokens.SERVER_CONF.name):
    """<runtime>/config/server.conf, with the settings and command line it gives (for policies)."""


class Launcher(RemoteFile, module=tokens.DYNAMIC_MODULE, name=tokens.LAUNCHER.name):
    """<runtime>/bin/serve.sh, the launcher that holds no deployment values."""


@dataclass
class InferenceHostArgs:
    config: HostConfig
    private_key: pulumi.Input[str]


class InferenceHost(pulumi.ComponentResource):
    def __init__(self, name: str, args: InferenceHostArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(tokens.INFERENCE_HOST, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        cfg = args.config
        ssh, runtime, server = cfg.ssh, cfg.runtime_dir, cfg.server
        self.host_key, connection = pinned_connection(
            name, pulumi.Output.secret(connection_input(ssh.host, ssh.port, ssh.user,
                                                        args.private_key)),
            f"{ssh.user}@{ssh.address}", ssh.host_key, child)

        self.build = LlamaServerBuild(f"{name}-llama-server", LlamaServerBuildArgs(
            connection=connection,
            runtime_dir=runtime,
            source=cfg.llama_cpp.source,
            cmake_flags=cfg.llama_cpp.cmake_flags,
        ), child)

        self.model = ModelFiles(f"{name}-model", ModelFilesArgs(
            connection=connection, runtime_dir=runtime, shards=cfg.model.shards), child)

        launcher_text = SERVE_SH.read_text()
        self.launcher = Launcher(f"{name}-serve-sh", RemoteFileArgs(
            connection=connection,
            path=posixpath.join(runtime, "bin", "serve.sh"),
            content=launcher_text,
            mode=0o755,
        ), child)

        settings = server_conf_settings(cfg)
        conf_text = render_server_conf(settings)
        argv = command_line(conf_text)
        # Seed 6.2.5: with an unreadable adapter serve.sh serves the base model, saying so.
        base_argv = command_line(render_server_conf({**settings, "SPEAR_SERVER_LORA": "none"}))
        self.server_conf = ServerConf(f"{name}-server-conf", RemoteFileArgs(
            connection=connection,
            path=posixpath.join(runtime, "config", "server.conf"),
            content=conf_text,
            facts={
                "settings": settings,
                "command_line": argv,
                "binds": [{"host": ssh.address, "address": server.host,
                           "port": server.port, "what": "llama-server"}],
            },
        ), child)

        source = source_input(cfg.llama_cpp.source)
        self.unit = SystemdUnit(f"{name}-unit", SystemdUnitArgs(
            connection=connection,
            unit=INFERENCE_UNIT,
            content=render_unit(runtime),
            slice=SYSTEM_SLICE,
            health=HealthCheck(port=server.port, address=server.host),
            command_line=argv,
            fallback_command_lines=[base_argv] if base_argv != argv else [],
            # Known before the update, so a preview shows which of them restarts the server.
            restart_triggers={
                "build_key": build_key(source, list(cfg.llama_cpp.cmake_flags)),
                "model": manifest_digest(manifest_input(cfg.model.shards)),
                "server_conf": content_digest(conf_text),
                "launcher": content_digest(launcher_text),
            },
        ), pulumi.ResourceOptions(parent=self,
                                  depends_on=[self.build, self.model, self.launcher, self.server_conf]))

        # llama-server lists the model by its path: serve.sh gives it no alias (seed 6.2.1).
        self.proof = prove_endpoint(name, EndpointProofArgs(
            endpoint=name,
            connection=connection,
            port=server.port,
            address=server.host,
            served_model=settings["SPEAR_SERVER_MODEL"],
            triggers={"started_at": self.unit.started_at},
        ), pulumi.ResourceOptions(parent=self, depends_on=[self.unit]))

        self.backend = cfg.backend
        self.reach = Reach(endpoint=name, host_key=self.host_key.host_key, ssh_host=ssh.host, ssh_port=ssh.port, ssh_user=ssh.user,
                           private_key=args.private_key, address=server.host, port=server.port,
                           served_model=settings["SPEAR_SERVER_MODEL"])

        self.outputs: dict[str, Any] = {
            "ssh_host_key": self.host_key.outputs(),
            "llama_server_version": self.build.version,
            "build_key": self.build.build_key,
            "model_path": self.model.model_path,
            "command_line": argv,
            "cgroup": self.unit.cgroup,
            **self.proof.outputs(cfg.backend),
        }
        self.register_outputs(self.outputs)
