"""Each kind of resource is described once, beside its class: the descriptor the reviewer's summary
reads is declared in the module that defines the resource, and spear/tokens.py is the one list of
our kinds."""

from __future__ import annotations

import collections
import importlib
import inspect
import pkgutil

import pulumi.dynamic

import components
from review import kubernetes, registry
from review.kinds import CLASSES, IN_PLACE, Kind
from spear import tokens

OUR_TOKENS = [t for t in vars(tokens).values() if isinstance(t, tokens.Token)]
# pulumi-command's types: described beside the one function that makes each (no class of ours).
COMMAND_TYPES = {t.type: t for t in vars(tokens).values()
                 if isinstance(t, tokens.ProviderType) and t.type.startswith("command:")}


def _resource_classes() -> dict[str, type]:
    """Type token -> the dynamic resource class that declares it, across components/."""
    found = {}
    for module in pkgutil.walk_packages(components.__path__, "components."):
        for value in vars(importlib.import_module(module.name)).values():
            if isinstance(value, type) and issubclass(value, pulumi.dynamic.Resource) \
                    and value.__module__ == module.name and "_resource_type_name" in vars(value) \
                    and value._resource_type_name != "dynamic:Resource":  # a base class
                found[f"pulumi-python:{value._resource_type_name}"] = value
    return found


def test_every_kind_of_ours_is_described_exactly_once():
    counts = collections.Counter(kind.type for kind in registry.declared())
    assert {t.type: counts[t.type] for t in OUR_TOKENS} == {t.type: 1 for t in OUR_TOKENS}
    assert [t for t, n in counts.items() if n > 1] == []


def test_every_descriptor_names_a_kind_spear_tokens_lists():
    listed = {t.type for t in OUR_TOKENS} | {kind.type for kind in kubernetes.KINDS} | set(COMMAND_TYPES)
    assert {kind.type for kind in registry.declared()} - listed == set()
    assert all(kind.type.startswith("kubernetes:") or kind.type == tokens.K8S_PROVIDER
               for kind in kubernetes.KINDS)


def test_each_descriptor_sits_in_the_module_of_its_class():
    classes = _resource_classes()
    assert set(classes) == {t.type for t in OUR_TOKENS}
    for module in pkgutil.walk_packages(components.__path__, "components."):
        loaded = importlib.import_module(module.name)
        for kind in ([loaded.KIND] if hasattr(loaded, "KIND") else []) + list(getattr(loaded, "KINDS", ())):
            if kind.type in COMMAND_TYPES:
                resource = kind.type.split(":")[1] + "." + kind.type.split(":")[2]  # remote.Command
                assert f"{resource}(" in inspect.getsource(loaded), kind.type
            else:
                assert classes[kind.type].__module__ == module.name, kind.type


def test_every_descriptor_says_what_its_update_is():
    for kind in registry.kinds().values():
        assert callable(kind.update) or kind.update in CLASSES, kind.type
        assert kind.replace in CLASSES, kind.type


def test_a_kind_nobody_describes_is_shown_by_its_type_and_updated_as_config():
    unknown = registry.kind("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole")
    assert unknown.part_name({}) == unknown.type
    assert unknown.classify("update", {}, {}) == "config only (restart)"


def test_a_change_that_restarts_nothing_never_reads_as_a_restart():
    # The developer keys, records and checks: an update of them restarts no server.
    for token in (tokens.GATEWAY_KEY, tokens.COMMAND_REMOTE, tokens.GATEWAY_BACKUP,
                  tokens.HOST_KEY, tokens.SMOKE_TEST, tokens.ENDPOINT_VERIFICATION,
                  tokens.GATEWAY_SMOKE_TEST, tokens.FLEET_THROUGHPUT):
        kind: Kind = registry.kind(token.type)
        assert kind.classify("update", {"a": 1}, {"a": 2}) == IN_PLACE, token.type
        assert not kind.restarts
