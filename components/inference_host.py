"""The SPEAR inference host: llama-server built on the host, its model, its config, its launcher,
the spear-inference system unit, and the smoke test that proves them together.

Each part is its own resource so that its diff is the upgrade: a new llama.cpp pin replaces the
build; a new model manifest re-verifies (and fetches) the shards; a changed setting rewrites
server.conf. Any of those restarts the service; only the first rebuilds.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any

import pulumi

from components.llama_server_build import LlamaServerBuild, LlamaServerBuildArgs, build_key, source_input
from components.model_files import ModelFiles, ModelFilesArgs, manifest_digest, manifest_input
from components.remote_file import RemoteFile, RemoteFileArgs, content_digest
from components.render import SERVE_SH, command_line, render_server_conf, render_unit
from components.smoke_test import SmokeTest, SmokeTestArgs
from components.ssh import connection_input
from components.systemd_unit import HealthCheck, SystemdUnit, SystemdUnitArgs
from stack_config import InferenceHost as HostSettings
from stack_config import LlamaCpp, Model, Server

UNIT_NAME = "spear-inference.service"
# Tool sandboxes live under user.slice; the server must not (seed 6.2.6).
UNIT_SLICE = "system.slice"


@dataclass
class InferenceHostArgs:
    host: HostSettings
    private_key: pulumi.Input[str]
    llama_cpp: LlamaCpp
    model: Model
    server: Server
    server_conf: dict[str, str]  # the SPEAR_SERVER_* settings (components.render)


class InferenceHost(pulumi.ComponentResource):
    def __init__(self, name: str, args: InferenceHostArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("spear:fleet:InferenceHost", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        ssh = args.host.ssh
        runtime = args.host.runtime_dir
        connection = pulumi.Output.secret(
            connection_input(ssh.host, ssh.port, ssh.user, args.private_key))
        host_id = f"{ssh.host}:{ssh.port}"

        self.build = LlamaServerBuild(f"{name}-llama-server", LlamaServerBuildArgs(
            connection=connection,
            runtime_dir=runtime,
            source=args.llama_cpp.source,
            cmake_flags=args.llama_cpp.cmake_flags,
        ), child)

        self.model = ModelFiles(f"{name}-model", ModelFilesArgs(
            connection=connection, runtime_dir=runtime, shards=args.model.shards), child)

        launcher_text = SERVE_SH.read_text()
        self.launcher = RemoteFile(f"{name}-serve-sh", "launcher", RemoteFileArgs(
            connection=connection,
            path=posixpath.join(runtime, "bin", "serve.sh"),
            content=launcher_text,
            mode=0o755,
        ), child)

        conf_text = render_server_conf(args.server_conf)
        argv = command_line(conf_text)
        self.server_conf = RemoteFile(f"{name}-server-conf", "server-conf", RemoteFileArgs(
            connection=connection,
            path=posixpath.join(runtime, "config", "server.conf"),
            content=conf_text,
            facts={
                "settings": args.server_conf,
                "command_line": argv,
                "binds": [{"host": host_id, "address": args.server.host,
                           "port": args.server.port, "what": "llama-server"}],
            },
        ), child)

        source = source_input(args.llama_cpp.source)
        self.unit = SystemdUnit(f"{name}-unit", SystemdUnitArgs(
            connection=connection,
            unit=UNIT_NAME,
            content=render_unit(runtime),
            slice=UNIT_SLICE,
            health=HealthCheck(port=args.server.port, address=args.server.host),
            # Known before the update, so a preview shows which of them restarts the server.
            restart_triggers={
                "build_key": build_key(source, list(args.llama_cpp.cmake_flags)),
                "model": manifest_digest(manifest_input(args.model.shards)),
                "server_conf": content_digest(conf_text),
                "launcher": content_digest(launcher_text),
            },
        ), pulumi.ResourceOptions(parent=self,
                                  depends_on=[self.build, self.model, self.launcher, self.server_conf]))

        self.smoke_test = SmokeTest(f"{name}-smoke-test", SmokeTestArgs(
            connection=connection,
            port=args.server.port,
            address=args.server.host,
            triggers={"started_at": self.unit.started_at},
        ), pulumi.ResourceOptions(parent=self, depends_on=[self.unit]))

        outputs: dict[str, Any] = {
            "llama_server_version": self.build.version,
            "build_key": self.build.build_key,
            "model_path": self.model.model_path,
            "command_line": argv,
            "cgroup": self.unit.cgroup,
            "smoke_test": self.smoke_test.summary,
        }
        self.outputs = outputs
        self.register_outputs(outputs)
