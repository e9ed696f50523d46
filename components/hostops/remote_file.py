"""A file on a host whose content the stack owns (server.conf, serve.sh).

`pulumi refresh` reads the file back, so a hand edit on the host shows up as drift and the
next `pulumi up` writes the stack's content again.
"""

from __future__ import annotations

import hashlib
import shlex
from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi.dynamic import ReadResult

from components.hostops.host_resource import HostProvider, HostResource
from components.hostops.ssh import Session
from review.kinds import CONFIG_ONLY, Kind
from spear import tokens


def content_digest(content: str) -> str:
    return hashlib.sha256(content.encode()).hexdigest()


@dataclass
class RemoteFileArgs:
    connection: pulumi.Input[dict]
    path: str
    content: pulumi.Input[str]
    mode: int = 0o644
    # Extra properties recorded with the file for policies and reviewers (e.g. the settings a
    # config file was rendered from, the ports it makes something bind).
    facts: dict[str, Any] = field(default_factory=dict)
    # The content holds secrets (an env file, a key): encrypted in state, never shown in a diff.
    secret: bool = False


class RemoteFileProvider(HostProvider):
    replace_fields = ("path",)
    update_fields = ("content", "mode")

    def resource_id(self, props: dict[str, Any]) -> str:
        return f"{props['connection']['host']}:{props['path']}"

    def apply(self, props: dict[str, Any], olds: dict[str, Any] | None) -> dict[str, Any]:
        with Session(props["connection"]) as host:
            host.write(props["path"], props["content"], int(props["mode"]))
        return {**props, "digest": content_digest(props["content"])}

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        with Session(props["connection"]) as host:
            content = host.read(props["path"])
        if content is None:
            return ReadResult(id_=None, outs={})  # gone: refresh drops it, `up` writes it again
        return ReadResult(id_=id_, outs={**props, "content": content, "digest": content_digest(content)})

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        with Session(props["connection"]) as host:
            host.run(f"rm -f {shlex.quote(props['path'])}")


KIND = Kind.of(tokens.REMOTE_FILE, "remote file", CONFIG_ONLY)

class RemoteFile(HostResource, module=tokens.DYNAMIC_MODULE, name=tokens.REMOTE_FILE.name):
    digest: pulumi.Output[str]

    def __init__(self, name: str, args: RemoteFileArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(
            RemoteFileProvider(),
            name,
            {
                "connection": args.connection,
                "path": args.path,
                "content": args.content,
                "mode": args.mode,
                **args.facts,
            },
            opts,
            outputs=("digest",),
            secret_inputs=("content",) if args.secret else (),
        )
