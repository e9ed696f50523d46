"""`developers`: one virtual key per developer on the gateway (seed 001 step 5), with the models
they may use, a budget in USD and the window after which it resets.

A budget without a window never resets and locks the developer out for good once spent, so
`budgetDuration` is required; a developer never gets `frontier` directly (it is the hatch,
reached by escalation alone).

`ring` and `priority` go into the key's metadata, and the gateway's hooks act on them
(hosts/gateway/spear_gateway/tenancy.py): a `pilot` developer is served by the fleet's canary
while one is up (everyone else never is), and `priority` is the vLLM priority class the gateway
stamps on the developer's requests (interactive 0, background 10: agent loops yield to people).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from config.checker import MISSING, NAME, NAME_TEXT, Checker, from_text, get, show
from config.types import Developer
from spear.rules import (BUDGET_DURATION, BUDGET_DURATION_TEXT, CODER_MODEL,
                         DEFAULT_PRIORITY_CLASS, FRONTIER_MODEL, GENERAL_RING, PRIORITY_CLASSES,
                         RINGS, KeyProblem, developer_key_problems)


KEYS = ("developers",)

_KEYS = ("team", "models", "maxBudget", "budgetDuration", "tpmLimit", "rpmLimit",
         "maxParallelRequests", "metadata", "rotation", "rotationGracePeriod", "ring", "priority")
_TEXT = re.compile(r"[ -~]{0,256}")  # metadata values: one printable line


def parse(check: Checker, value: Any, has_gateway: bool) -> dict[str, Developer]:
    developers = check.named_map("developers", value, "a developer", required=False)
    if developers is None or not developers:
        return {}
    if not has_gateway:
        check.report("developers", "developers without a gateway",
                     "developers only with `gateway` (their keys live there)")
        return {}
    parsed = {}
    for name, item in developers.items():
        developer = _developer(check, name, item)
        if developer is not None:
            parsed[name] = developer
    return parsed


def _developer(check: Checker, name: str, value: Any) -> Developer | None:
    start = check.mark()
    key = f"developers.{name}"
    dev = check.obj(key, value, _KEYS)
    if dev is None:
        return None
    team = get(dev, "team")
    team = None if team is MISSING else check.pattern(f"{key}.team", team, NAME, NAME_TEXT)
    given_models = get(dev, "models")
    # The key's budget rules are spear/rules.py's alone (the policy pack asks the same function),
    # reported here at the settings at fault: models, maxBudget and budgetDuration.
    faults = developer_key_problems([CODER_MODEL] if given_models is MISSING else given_models,
                                    from_text(get(dev, "maxBudget")), get(dev, "budgetDuration"))
    models = _models(check, f"{key}.models", given_models, faults)
    budget = _budget(check, f"{key}.maxBudget", get(dev, "maxBudget"), faults)
    duration = check.text(f"{key}.budgetDuration", get(dev, "budgetDuration"),
                          lambda v: None if any(p.field == "budget_duration" for p in faults) else v,
                          BUDGET_DURATION_TEXT + " (required: a budget without one never resets"
                          " and locks the developer out once spent)")
    limits = [check.optional_integer(f"{key}.{limit}", get(dev, limit), 1)
              for limit in ("tpmLimit", "rpmLimit", "maxParallelRequests")]
    metadata = _metadata(check, f"{key}.metadata", get(dev, "metadata"))
    rotation = check.integer(f"{key}.rotation", get(dev, "rotation"), 0, default=0)
    grace = check.pattern(f"{key}.rotationGracePeriod", get(dev, "rotationGracePeriod"),
                          BUDGET_DURATION, BUDGET_DURATION_TEXT, default="24h")
    ring = check.choice(f"{key}.ring", get(dev, "ring"), RINGS, default=GENERAL_RING)
    priority = check.choice(f"{key}.priority", get(dev, "priority"), tuple(PRIORITY_CLASSES),
                            default=DEFAULT_PRIORITY_CLASS)
    if not check.clean_since(start):
        return None
    tpm, rpm, parallel = limits
    return Developer(name=name, team=team, models=models, max_budget=budget,
                     budget_duration=duration, tpm_limit=tpm, rpm_limit=rpm,
                     max_parallel_requests=parallel, metadata=metadata, rotation=rotation,
                     rotation_grace=grace, ring=ring, priority=priority)


def _models(check: Checker, key: str, value: Any, faults: list[KeyProblem]) -> tuple[str, ...]:
    if value is MISSING:
        return (CODER_MODEL,)
    allowed = (f"a non-empty list of the gateway's model names other than {FRONTIER_MODEL}"
               f" (the hatch is reached by escalation only): {CODER_MODEL}")
    at_fault = [p for p in faults if p.field == "models"]
    if any(not p.positions for p in at_fault):
        check.fail(key, value, allowed)
        return ()
    for i in sorted({i for p in at_fault for i in p.positions}):
        check.fail(f"{key}[{i}]", value[i], allowed)
    return tuple(dict.fromkeys(value))


def _budget(check: Checker, key: str, value: Any, faults: list[KeyProblem]) -> float | None:
    if any(p.field == "max_budget" for p in faults):
        check.fail(key, value, "an amount in USD greater than 0"
                   + (" (required)" if value is MISSING else ""))
        return None
    return float(from_text(value))


def _metadata(check: Checker, key: str, value: Any) -> dict[str, str]:
    if value is MISSING:
        return {}
    if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) and _TEXT.fullmatch(v)
            for k, v in value.items()):
        check.report(key, show(value), "a map of names to one-line strings")
        return {}
    return dict(value)
