"""LiteLLM installed on the gateway host by hosts/gateway/install-litellm.sh: a virtualenv per
build key, `<runtime>/venv` a symlink to the one the stack pins.

The install key is a digest of what the venv is made of (the LiteLLM version, the other pins,
the install script, the package source, the query engine and its bundle), all known at preview:
a version bump shows up as a replace of this resource (reinstall), then migrations and a restart.
A previous venv is kept, so rolling the version back switches `current` without a reinstall.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import shlex
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi.dynamic import ReadResult

from components.gateway import offline_engine
from components.gateway.render import HOSTS_DIR
from components.hostops.host_resource import HostProvider, HostResource
from components.hostops.ssh import Session
from config.types import OFFLINE_ENGINE, Gateway
from review.kinds import CONFIG_ONLY, REPLACE, Change, Kind, changed_lines, updates_only
from spear import tokens

INSTALL_SH = HOSTS_DIR / "install-litellm.sh"
REQUIREMENTS = HOSTS_DIR / "requirements.txt"


def install_key(gateway: Gateway, bundle_key: str | None) -> str:
    recipe = {
        "litellm": gateway.litellm_version,
        "requirements": REQUIREMENTS.read_text(),
        "script": INSTALL_SH.read_text(),
        "index_url": gateway.packages.index_url,
        "wheelhouse": gateway.packages.wheelhouse,
        "engine": gateway.database.query_engine,
        "bundle": bundle_key,
    }
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


def venv_path(gateway: Gateway) -> str:
    """The venv the proxy runs: a symlink install-litellm.sh switches to a finished build."""
    return posixpath.join(gateway.runtime_dir, "venv")


@dataclass
class LitellmInstallArgs:
    connection: pulumi.Input[dict]
    gateway: Gateway
    # The offline query engine bundle's content key (components/gateway/offline_engine.py);
    # None with the native engine.
    bundle_key: str | None


class LitellmInstallProvider(HostProvider):
    replace_fields = ("install_key",)

    def resource_id(self, props: dict[str, Any]) -> str:
        return f"{props['connection']['host']}:{props['venv']}:{props['install_key']}"

    def apply(self, props: dict[str, Any], olds: dict[str, Any] | None) -> dict[str, Any]:
        q = shlex.quote
        runtime, venv = props["runtime_dir"], props["venv"]
        kit = posixpath.join(runtime, "kit", props["install_key"])
        with Session(props["connection"]) as host:
            host.write(f"{kit}/install-litellm.sh", props["script"], 0o755)
            host.write(f"{kit}/requirements.txt", props["requirements"])
            engine_args = f"--engine {q(props['engine'])}"
            if props["engine"] == OFFLINE_ENGINE:
                host.upload(str(offline_engine.bundle()), f"{kit}/prisma-offline.tar.gz")
                host.run(f"rm -rf {q(kit)}/prisma-offline && mkdir -p {q(kit)}/prisma-offline &&"
                         f" tar -xzf {q(kit)}/prisma-offline.tar.gz -C {q(kit)}/prisma-offline")
                engine_args += f" --prisma-offline {q(kit)}/prisma-offline"
                # The proxy runs the engine from here (render.engine_environment).
                host.run(f"ln -sfn {q(kit)}/prisma-offline {q(runtime)}/engine.new &&"
                         f" mv -T {q(runtime)}/engine.new {q(runtime)}/engine")
            source = (f"--wheelhouse {q(props['wheelhouse'])}" if props.get("wheelhouse")
                      else f"--index-url {q(props['index_url'])}")
            # It switches `venv` (a symlink to venv.builds/<its key>) in one rename when done.
            host.run(f"{q(kit)}/install-litellm.sh --venv {q(venv)}"
                     f" --version {q(props['version'])} {source} {engine_args}", timeout=3600)
            version = host.run(f"{q(venv)}/bin/python -c 'import importlib.metadata as m;"
                               f" print(m.version(\"litellm\"))'").stdout.strip()
        return {**props, "installed_version": version}

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        with Session(props["connection"]) as host:
            complete = host.run(f"test -f {shlex.quote(props['venv'])}/.complete", check=False)
        if complete.code != 0:
            return ReadResult(id_=None, outs={})  # gone: the next `up` installs it again
        return ReadResult(id_=id_, outs=dict(props))

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        return None  # kept for a rollback; `current` moves to the replacement's venv


@updates_only
def _install_details(change: Change) -> list[str]:
    old, new = change.old.get("version"), change.new.get("version")
    return [f"LiteLLM {old} -> {new}"] if old != new else changed_lines(change.old, change.new)


def _install_line(change: Change) -> str | None:
    if change.change != REPLACE:
        return None
    old, new = change.old.get("version"), change.new.get("version")
    what = f"LiteLLM {old} -> {new}" if old != new else "LiteLLM reinstalled (its install recipe changed)"
    return f"gateway: {what} (reinstall, migrate, restart)"


KIND = Kind.of(tokens.LITELLM_INSTALL, "LiteLLM install", CONFIG_ONLY, details=_install_details,
               gateway_line=_install_line, meanings={
    REPLACE: "a new virtualenv with the pinned LiteLLM (the previous one stays for a rollback);"
             " then the new migrations and a restart",
})

class LitellmInstall(HostResource, module=tokens.DYNAMIC_MODULE, name=tokens.LITELLM_INSTALL.name):
    installed_version: pulumi.Output[str]
    install_key: pulumi.Output[str]

    def __init__(self, name: str, args: LitellmInstallArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        gateway = args.gateway
        key = install_key(gateway, args.bundle_key)
        venv = venv_path(gateway)
        super().__init__(LitellmInstallProvider(), name, {
            "connection": args.connection,
            "runtime_dir": gateway.runtime_dir,
            "install_key": key,
            "venv": venv,
            "version": gateway.litellm_version,
            "index_url": gateway.packages.index_url,
            "wheelhouse": gateway.packages.wheelhouse,
            "engine": gateway.database.query_engine,
            "bundle_key": args.bundle_key,
            "script": INSTALL_SH.read_text(),
            "requirements": REQUIREMENTS.read_text(),
        }, opts, outputs=("installed_version",))
