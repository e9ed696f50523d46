"""The model's GGUF shards on the inference host, verified against the manifest.

Each shard is checked by size and sha256 on the host. One that is missing or wrong is fetched
when the manifest says from where (a file on this machine is uploaded; a URL is downloaded by
the host), then checked again; otherwise the update fails naming the shard. A verified shard is
remembered with its size and mtime, so an unchanged 79 GiB model is not hashed on every update.
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

from components.hostops.host_resource import HostProvider, HostResource
from components.hostops.ssh import RemoteError, Session
from components.inference_host.render import gguf_dir
from config.types import Shard
from review.kinds import MODEL_REFETCH, Change, Kind, changed_keys, updates_only
from spear import tokens


def manifest_input(shards: tuple[Shard, ...]) -> list[dict[str, Any]]:
    return [{"name": s.name, "size": s.size, "sha256": s.sha256, "source": s.source} for s in shards]


def manifest_path(runtime_dir: str) -> str:
    return posixpath.join(runtime_dir, "models", "manifest.json")


def manifest_digest(shards: list[dict[str, Any]]) -> str:
    """Identifies the model (names, sizes, hashes; not where shards are fetched from)."""
    pinned = [{k: s[k] for k in ("name", "size", "sha256")} for s in shards]
    return hashlib.sha256(json.dumps(pinned, sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class ModelFilesArgs:
    connection: pulumi.Input[dict]
    runtime_dir: str
    shards: tuple[Shard, ...]


class ModelFilesProvider(HostProvider):
    replace_fields = ("runtime_dir",)
    update_fields = ("digest",)

    def resource_id(self, props: dict[str, Any]) -> str:
        return f"{gguf_dir(props['runtime_dir'])}#{props['digest']}"

    def apply(self, props: dict[str, Any], olds: dict[str, Any] | None) -> dict[str, Any]:
        folder = gguf_dir(props["runtime_dir"])
        fetched = []
        with Session(props["connection"]) as host:
            for shard in props["shards"]:
                path = posixpath.join(folder, shard["name"])
                if self._verified(host, path, shard):
                    continue
                if not shard.get("source"):
                    raise RemoteError(
                        f"model shard {path} is missing or does not match the manifest"
                        f" (size {shard['size']}, sha256 {shard['sha256']}), and the manifest"
                        " gives no source to fetch it from")
                self._fetch(host, shard, path)
                fetched.append(shard["name"])
                if not self._verified(host, path, shard):
                    raise RemoteError(f"model shard {shard['name']} fetched from {shard['source']}"
                                      f" does not match the manifest (size {shard['size']},"
                                      f" sha256 {shard['sha256']})")
            if olds:
                self._remove_dropped(host, folder, olds["shards"], props["shards"])
            # The manifest on the host says what the shards there were verified against.
            host.write(manifest_path(props["runtime_dir"]), json.dumps(
                {"digest": props["digest"], "shards": [
                    {k: s[k] for k in ("name", "size", "sha256")} for s in props["shards"]]},
                indent=2) + "\n")
        return {**props, "model_path": posixpath.join(folder, props["shards"][0]["name"]),
                "fetched": fetched}

    @staticmethod
    def _verified(host: Session, path: str, shard: dict[str, Any]) -> bool:
        q = shlex.quote
        stamp = f"{posixpath.dirname(path)}/.verified/{posixpath.basename(path)}"
        stat = host.run(f"stat -c '%s %Y' {q(path)}", check=False)
        if stat.code != 0:
            return False
        size, mtime = stat.stdout.split()
        if int(size) != int(shard["size"]):
            return False
        expected_stamp = f"{shard['sha256']} {size} {mtime}"
        if (host.read(stamp) or "").strip() == expected_stamp:
            return True
        if host.run(f"sha256sum {q(path)}").stdout.split()[0] != shard["sha256"]:
            return False
        host.write(stamp, expected_stamp + "\n")
        return True

    @staticmethod
    def _fetch(host: Session, shard: dict[str, Any], path: str) -> None:
        q = shlex.quote
        if shard["source"].startswith(("http://", "https://")):
            host.run(f"mkdir -p {q(posixpath.dirname(path))} && curl -fsSL -o {q(path)}.part"
                     f" {q(shard['source'])} && mv {q(path)}.part {q(path)}")
        else:
            host.upload(shard["source"], path)

    @staticmethod
    def _remove_dropped(host: Session, folder: str, old: list[dict], new: list[dict]) -> None:
        dropped = {s["name"] for s in old} - {s["name"] for s in new}
        for name in sorted(dropped):
            host.run(f"rm -f {shlex.quote(posixpath.join(folder, name))}"
                     f" {shlex.quote(posixpath.join(folder, '.verified', name))}")

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        # A cheap presence check: re-hashing tens of GiB belongs to `up`, not to refresh.
        folder = gguf_dir(props["runtime_dir"])
        with Session(props["connection"]) as host:
            present = all(
                host.run(f"test -f {shlex.quote(posixpath.join(folder, s['name']))}",
                         check=False).code == 0
                for s in props["shards"])
        return ReadResult(id_=id_ if present else None, outs=props if present else {})

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        with Session(props["connection"]) as host:
            self._remove_dropped(host, gguf_dir(props["runtime_dir"]), props["shards"], [])
            host.run(f"rm -f {shlex.quote(manifest_path(props['runtime_dir']))}")


def _shard_details(change: Change) -> list[str]:
    old_shards = {s["name"]: s for s in change.old.get("shards") or []}
    new_shards = {s["name"]: s for s in change.new.get("shards") or []}
    lines = [f"shard removed: `{n}`" for n in old_shards if n not in new_shards]
    lines += [f"shard added: `{n}`" for n in new_shards if n not in old_shards]
    return lines + [f"shard `{n}`: new {', '.join(changed_keys(old_shards[n], s))}"
                    for n, s in new_shards.items()
                    if n in old_shards and changed_keys(old_shards[n], s)]


KIND = Kind.of(tokens.MODEL_FILES, "model files", MODEL_REFETCH, details=updates_only(_shard_details),
               meanings={MODEL_REFETCH: "re-verifies every shard (size, sha256) and fetches the"
                                        " ones the host lacks; removes shards no longer listed"})

class ModelFiles(HostResource, module=tokens.DYNAMIC_MODULE, name=tokens.MODEL_FILES.name):
    digest: pulumi.Output[str]
    model_path: pulumi.Output[str]

    def __init__(self, name: str, args: ModelFilesArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        shards = manifest_input(args.shards)
        super().__init__(
            ModelFilesProvider(),
            name,
            {
                "connection": args.connection,
                "runtime_dir": args.runtime_dir,
                "shards": shards,
                "digest": manifest_digest(shards),
            },
            opts,
            outputs=("model_path", "fetched"),
        )
