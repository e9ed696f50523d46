"""Every developer key has a budget that resets and holds: `budget_duration` (a budget without one
never resets and locks the developer out for good once spent), `max_budget` > 0, models only
among the gateway's names, and never `frontier` directly (it is the hatch, reached by escalation
alone). The rule itself is spear/rules.py::developer_key_problems, which the config checker uses
too."""

from __future__ import annotations

from collections.abc import Sequence

from pulumi_policy import (EnforcementLevel, ReportViolation, ResourceValidationArgs,
                           ResourceValidationPolicy)

from policies.common import for_type
from spear import tokens
from spear.rules import developer_key_problems

SEED = ('seed 001 step 5 and "Budget hygiene" (one virtual key per developer, with a budget'
        " that resets)")


@for_type(tokens.GATEWAY_KEY)
def developer_key_budget(args: ResourceValidationArgs, report: ReportViolation) -> None:
    props = args.props
    models = props["models"]
    # The engine's lists arrive as read-only sequences (the unknown-checking proxy).
    listed = list(models) if isinstance(models, Sequence) and not isinstance(models, str) else models
    problems = developer_key_problems(listed, props["max_budget"], props["budget_duration"])
    if problems:
        developer = props["developer"]
        report(f"{SEED}: the key of {developer}: {'; '.join(p.why for p in problems)}. Fix: set"
               f" developers.{developer}.budgetDuration (e.g. 30d), maxBudget above 0 and models"
               " among the gateway's names other than frontier (default [coder]).")


POLICY = ResourceValidationPolicy(
    name="developer-key-budget",
    description="Every developer key has a budget window, a budget above 0 and no direct frontier.",
    validate=developer_key_budget,
    enforcement_level=EnforcementLevel.MANDATORY,
)
