"""The spear-fleet policy pack: one rule per module, grouped by family, each named after its rule.

The pack runs from this folder; the repository root goes on the path so the rules share the
project's one home of each seed rule (`spear/rules.py`, `spear/tokens.py`) with the program.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pulumi_policy import EnforcementLevel, PolicyPack  # noqa: E402

from policies.pack import RULES  # noqa: E402

PolicyPack(
    name="spear-fleet",
    # Each rule states its own level; a rule that forgot would block rather than only advise.
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=[rule.POLICY for rule in RULES],
)
