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


class HostProvider(ResourceProvider):
    """Diffs on the inputs a subclass names; the SSH connection never forces a change.

    `replace_fields`: a change re-creates the resource (a new build, say);
    `update_fields`: a change updates it in place (rewrite a file, restart a service).
    """

    replace_fields: tuple[str, ...] = ()
    update_fields: tuple[str, ...] = ()

    def diff(self, _id: str, olds: Mapping[str, Any], news: Mapping[str, Any]) -> DiffResult:
        replaces = [k for k in self.replace_fields if olds.get(k) != news.get(k)]
        updates = [k for k in self.update_fields if olds.get(k) != news.get(k)]
        return DiffResult(
            changes=bool(replaces or updates),
            replaces=replaces,
            delete_before_replace=False,
        )

    def update(self, _id: str, olds: Mapping[str, Any], news: Mapping[str, Any]) -> UpdateResult:
        return UpdateResult(outs=self.apply(dict(news), olds=dict(olds)))

    def apply(self, props: dict[str, Any], olds: dict[str, Any] | None) -> dict[str, Any]:
        """Makes the host match props (olds: the previous outputs on update); returns outputs."""
        raise NotImplementedError

    def resource_id(self, props: Mapping[str, Any]) -> str:
        """A stable id naming what was made on the host."""
        raise NotImplementedError

    def create(self, props: Mapping[str, Any]) -> CreateResult:
        return CreateResult(id_=self.resource_id(props), outs=self.apply(dict(props), olds=None))


class CheckProvider(HostProvider):
    """A check (a probe, a smoke test, a measurement): it runs on create and update, and leaves
    nothing behind, so a refresh keeps its last result and a delete has nothing to remove."""

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return ReadResult(id_=id_, outs=dict(props))

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        return None


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
        super().__init__(
            provider,
            name,
            {**props, **{out: None for out in outputs}},
            pulumi.ResourceOptions.merge(opts, secret_outputs),
        )
