"""What every spear-fleet resource that changes something on a host over SSH has in common.

They are Python dynamic resources, each class with its own type token (spear/tokens.py), so
policies, the preview summary and people reading state tell them apart by type.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pulumi
from pulumi.dynamic import (CreateResult, DiffResult, ReadResult, Resource, ResourceProvider,
                            UpdateResult)

from components.hostops import known_hosts
from components.hostops.ssh import RemoteError


# How a resource reaches its host: the SSH login with the key the host must present (`reach`
# says it without secrets, for the reviewer), or a cluster's credentials.
REACH_FIELDS = ("connection", "reach", "cluster")


class HostProvider(ResourceProvider):
    """Diffs on the inputs a subclass names; the way in never changes the host.

    `replace_fields`: a change re-creates the resource (a new build, say);
    `update_fields`: a change updates it in place (rewrite a file, restart a service);
    `stale(olds)`: what a refresh found calls for an update with the same inputs.
    A change of only the way in (REACH_FIELDS) is an update that records it and sends nothing:
    refresh and destroy use the recorded one, and a re-keyed host refuses the old key.
    """

    replace_fields: tuple[str, ...] = ()
    update_fields: tuple[str, ...] = ()
    delete_before_replace = False

    def stale(self, olds: Mapping[str, Any]) -> bool:
        return False

    def _changed(self, olds: Mapping[str, Any], news: Mapping[str, Any]) -> tuple[list[str], bool]:
        replaces = [k for k in self.replace_fields if olds.get(k) != news.get(k)]
        work = bool(replaces or self.stale(olds)
                    or any(olds.get(k) != news.get(k) for k in self.update_fields))
        return replaces, work

    def diff(self, _id: str, olds: Mapping[str, Any], news: Mapping[str, Any]) -> DiffResult:
        replaces, work = self._changed(olds, news)
        # Only the ones it takes: another kind's output may share a name (the database's cluster).
        reach = any(olds.get(k) != news[k] for k in REACH_FIELDS if k in news)
        return DiffResult(changes=work or reach, replaces=replaces,
                          delete_before_replace=self.delete_before_replace)

    def update(self, _id: str, olds: Mapping[str, Any], news: Mapping[str, Any]) -> UpdateResult:
        if not self._changed(olds, news)[1]:
            return UpdateResult(outs={**olds, **{k: news[k] for k in REACH_FIELDS if k in news}})
        return UpdateResult(outs=self._applied(dict(news), dict(olds)))

    def apply(self, props: dict[str, Any], olds: dict[str, Any] | None) -> dict[str, Any]:
        """Makes the host match props (olds: the previous outputs on update); returns outputs."""
        raise NotImplementedError

    def resource_id(self, props: Mapping[str, Any]) -> str:
        """A stable id naming what was made on the host."""
        raise NotImplementedError

    def create(self, props: Mapping[str, Any]) -> CreateResult:
        return CreateResult(id_=self.resource_id(props), outs=self._applied(dict(props), None))

    def _applied(self, props: dict[str, Any], olds: dict[str, Any] | None) -> dict[str, Any]:
        # The engine prints an error's whole traceback; one the host explains (a failed command,
        # a refused key, a lost connection, a server that does not answer) is raised from here,
        # with its message and without the frames of spear-fleet and paramiko that led to it.
        try:
            return self.apply(props, olds=olds)
        except (RemoteError, ConnectionError) as err:
            raise err.with_traceback(None) from None


class CheckProvider(HostProvider):
    """A check (a probe, a smoke test, a measurement): it runs on create and update, and leaves
    nothing behind, so a refresh keeps its last result and a delete has nothing to remove."""

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return ReadResult(id_=id_, outs=dict(props))

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        return None


def _reach(connection: Mapping[str, Any] | None) -> str | None:
    """The login and the host key a connection expects, without its secret (the private key)."""
    if connection is None:
        return None
    key = known_hosts.parse(connection["host_key"]) if connection.get("host_key") else None
    login = f"{connection.get('user') or ''}@{connection['host']}:{connection.get('port') or ''}"
    return f"{login} host key {known_hosts.fingerprint(key) if key else 'from known_hosts'}"


class HostResource(Resource):
    """Base of the resources: declares outputs and keeps the connection (and any other secret
    inputs) secret.

    Subclasses name their type: `class X(HostResource, module=DYNAMIC_MODULE, name=X_TOKEN.name)`.
    """

    def __init__(
        self,
        provider: HostProvider,
        name: str,
        props: Mapping[str, Any],
        opts: pulumi.ResourceOptions | None,
        outputs: Iterable[str] = (),
        secret_inputs: Iterable[str] = (),
    ) -> None:
        # The connection holds the SSH key, a cluster its kubeconfig; secret_inputs name others
        # (API keys), so that state keeps them encrypted whatever form they arrive in.
        secret_outputs = pulumi.ResourceOptions(
            additional_secret_outputs=["connection", "cluster", *secret_inputs])
        reach = {"reach": pulumi.Output.unsecret(pulumi.Output.from_input(
            props["connection"]).apply(_reach))} if props.get("connection") is not None else {}
        super().__init__(
            provider,
            name,
            {**props, **reach, **{out: None for out in outputs}},
            pulumi.ResourceOptions.merge(opts, secret_outputs),
        )
