"""Every kind's descriptor, found where it is declared: a module of components/ (beside the
class) exporting `KIND` or `KINDS`, and review/kubernetes.py. spear/tokens.py is the list of our
kinds; each must be described exactly once (tests/unit/test_review_kinds.py)."""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Mapping
from typing import Any

import components
from review import kubernetes
from review.kinds import CONFIG_ONLY, Kind
from spear import tokens


def declared() -> list[Kind]:
    """Every descriptor, in the order of the modules that declare them."""
    found = list(kubernetes.KINDS)
    for module in pkgutil.walk_packages(components.__path__, "components."):
        loaded = importlib.import_module(module.name)
        found += [loaded.KIND] if hasattr(loaded, "KIND") else []
        found += list(getattr(loaded, "KINDS", ()))
    return found


@functools.cache
def kinds() -> dict[str, Kind]:
    """Type -> descriptor, in the order spear/tokens.py names our kinds (the order of the
    summary's gateway section), then the Kubernetes ones."""
    order = [t.type for t in vars(tokens).values() if isinstance(t, tokens.Token)]
    by_type = {kind.type: kind for kind in declared()}
    return dict(sorted(by_type.items(), key=lambda item: (
        order.index(item[0]) if item[0] in order else len(order))))


def kind(type_: str) -> Kind:
    """The type's descriptor; a kind nobody describes is shown by its type, updated as config."""
    return kinds().get(type_) or Kind(type_, type_, CONFIG_ONLY)


def part_name(type_: str, inputs: Mapping[str, Any]) -> str:
    if type_ == tokens.STACK:
        return "the stack"
    return kubernetes.labelled_name(type_, inputs) or kind(type_).part_name(inputs)
