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

from typing import Any

from config.checker import MISSING, Checker, from_text
from config.options import Named, Opt, Raw, build, declared
from config.types import Developer
from spear.rules import (BUDGET_DURATION, BUDGET_DURATION_TEXT, CODER_MODEL, FRONTIER_MODEL,
                         KeyProblem, developer_key_problems)

_MODELS_TEXT = (f"a non-empty list of the gateway's model names other than {FRONTIER_MODEL}"
                f" (the hatch is reached by escalation only): {CODER_MODEL}")
# The key's budget rules are spear/rules.py's alone (the policy pack asks the same function):
# these three are judged there, and reported here at the setting at fault.
DEVELOPER = declared(
    Developer,
    models=Opt(Raw({"type": "array", "items": {"type": "string"}, "minItems": 1}),
               "the gateway model names the key may use", default=[CODER_MODEL]),
    maxBudget=Opt(Raw({"anyOf": [{"type": "number", "exclusiveMinimum": 0},
                                 {"type": "string"}]}), "USD per budget window"),
    budgetDuration=Opt(Raw({"type": "string", "pattern": f"^(?:{BUDGET_DURATION.pattern})$"}),
                       "the window after which the budget resets (30d, 1mo, ...)"))
_DEVELOPERS = Named(DEVELOPER, "a developer", non_empty=False)
OPTIONS = {"developers": Opt(_DEVELOPERS, "one virtual key per developer, by name (only with"
                             " gateway)", default={})}


def parse(check: Checker, value: Any) -> dict[str, Developer]:
    developers = {} if value is MISSING else _DEVELOPERS.entries(check, "developers", value)
    parsed = {}
    for name, item in (developers or {}).items():
        developer = _developer(check, name, item)
        if developer is not None:
            parsed[name] = developer
    return parsed


def _developer(check: Checker, name: str, value: Any) -> Developer | None:
    start = check.mark()
    key = f"developers.{name}"
    dev = DEVELOPER.read(check, key, value)
    if dev is None:
        return None
    given_models, budget = dev["models"], dev["maxBudget"]
    faults = developer_key_problems(given_models, from_text(budget), dev["budgetDuration"])
    _report_models(check, f"{key}.models", given_models, faults)
    if any(p.field == "max_budget" for p in faults):
        check.fail(f"{key}.maxBudget", budget, "an amount in USD greater than 0"
                   + (" (required)" if budget is MISSING else ""))
    if any(p.field == "budget_duration" for p in faults):
        check.fail(f"{key}.budgetDuration", dev["budgetDuration"], BUDGET_DURATION_TEXT
                   + " (required: a budget without one never resets and locks the developer"
                   " out once spent)")
    if not check.clean_since(start):
        return None
    return build(Developer, dev, name=name, models=tuple(dict.fromkeys(given_models)),
                 max_budget=float(from_text(budget)), budget_duration=dev["budgetDuration"])


def _report_models(check: Checker, key: str, value: Any, faults: list[KeyProblem]) -> None:
    at_fault = [p for p in faults if p.field == "models"]
    if any(not p.positions for p in at_fault):
        check.fail(key, value, _MODELS_TEXT)
    for i in sorted({i for p in at_fault for i in p.positions}):
        check.fail(f"{key}[{i}]", value[i], _MODELS_TEXT)
