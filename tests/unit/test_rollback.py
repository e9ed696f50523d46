"""gate/rollback.py: the config edits that make the previous pair stable again (the real
`pulumi up` of a rollback runs in tests/integration/test_vllm_fleet_on_kubernetes.py)."""

from __future__ import annotations

import pytest

from gate.rollback import RollbackError, plan
from tests.support.config_cases import CANARY_PAIR, STABLE_PAIR

KEY = "spear-fleet:vllmFleet"


def test_the_previous_pair_becomes_stable_key_by_key_as_text():
    commands = plan({"stable": CANARY_PAIR, "previous": {**STABLE_PAIR, "digest": "sha256:" + "c" * 64}})
    assert commands == [
        ["config", "rm", "--path", f"{KEY}.stable"],
        ["config", "set", "--path", f"{KEY}.stable.tag", "v0.24.0", "--type", "string"],
        ["config", "set", "--path", f"{KEY}.stable.digest", "sha256:" + "c" * 64, "--type", "string"],
        ["config", "set", "--path", f"{KEY}.stable.model", STABLE_PAIR["model"], "--type", "string"],
        ["config", "set", "--path", f"{KEY}.stable.revision", STABLE_PAIR["revision"], "--type", "string"],
    ]


def test_a_canary_of_the_pair_rolled_back_from_goes_too_and_another_stays():
    same = plan({"stable": CANARY_PAIR, "previous": STABLE_PAIR, "canary": {**CANARY_PAIR, "replicas": 1}})
    assert same[-1] == ["config", "rm", "--path", f"{KEY}.canary"]
    other = plan({"stable": CANARY_PAIR, "previous": STABLE_PAIR,
                  "canary": {**CANARY_PAIR, "tag": "v0.26.0", "replicas": 1}})
    assert ["config", "rm", "--path", f"{KEY}.canary"] not in other


@pytest.mark.parametrize("fleet,reason", [
    ({"stable": CANARY_PAIR}, "vllmFleet.previous is not declared"),
    ({"stable": STABLE_PAIR, "previous": STABLE_PAIR}, "already the previous pair"),
])
def test_nothing_to_roll_back_to_is_refused_saying_why(fleet, reason):
    with pytest.raises(RollbackError, match=reason):
        plan(fleet)
