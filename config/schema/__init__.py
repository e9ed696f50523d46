"""`parse`: the `spear-fleet` config namespace in, the typed FleetConfig out, or one ConfigError
listing every problem. Pure: plain Python values in (keys without the `spear-fleet:` prefix,
objects as dicts), so a bad stack is refused before a single resource is registered.

One module per top-level concern; each names its keys in KEYS. The keys are documented in
`stacks/Pulumi.prod.yaml`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from config.checker import Checker, get
from config.schema import backends, hosts, runpod
from config.types import API_KEY_NAMES, FleetConfig

TOP_KEYS = backends.KEYS + hosts.KEYS + runpod.KEYS
# Keys whose value is an object (the loader reads them as JSON).
OBJECT_KEYS = backends.KEYS + hosts.KEYS + runpod.OBJECT_KEYS


def parse(raw: Mapping[str, Any]) -> FleetConfig:
    """Check the whole namespace and type it; ConfigError lists every problem."""
    check = Checker()
    for unknown in sorted(set(raw) - set(TOP_KEYS)):
        check.report(unknown, "an unknown key", "one of " + ", ".join(TOP_KEYS))
    backend_table = backends.parse(check, get(raw, "backends"))
    inference_hosts = hosts.parse(check, get(raw, "inferenceHosts"), get(raw, "sshPrivateKeys"),
                                  backend_table, runpod.pod_names(get(raw, "runpod")))
    runpod_pods, api_keys = runpod.parse(
        check, get(raw, "runpod"), {name: get(raw, name) for name in API_KEY_NAMES},
        get(raw, "sshPrivateKeys"), backend_table, inference_hosts)
    check.raise_if_any()
    return FleetConfig(inference_hosts=inference_hosts, backends=backend_table,
                       runpod_pods=runpod_pods, api_keys=api_keys)
