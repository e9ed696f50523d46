"""developers.<name>.ring and .priority: parsed with defaults, every bad value named with the full
key and what is allowed, and carried in the key's metadata (where the gateway's hooks read them)."""

import pytest

from components.gateway.keys import GatewayKeyProvider, key_metadata
from config.checker import ConfigError
from config.load import parse_stack
from tests.support.config_cases import (DELETE, GATEWAY_SECRETS, allowed_for, changed,
                                        gateway_raw)

ANA, BOB = ("developers", "ana"), ("developers", "bob")


def test_a_developer_is_general_and_interactive_unless_the_stack_says_otherwise():
    raw = changed(changed(gateway_raw(), (*ANA, "ring"), DELETE), (*BOB, "priority"), DELETE)
    developers = parse_stack(raw).developers
    assert (developers["ana"].ring, developers["ana"].priority) == ("general", "interactive")
    assert (developers["bob"].ring, developers["bob"].priority) == ("general", "interactive")


def test_the_prod_example_declares_a_pilot_and_a_background_developer():
    developers = parse_stack(gateway_raw()).developers
    assert (developers["ana"].ring, developers["bob"].priority) == ("pilot", "background")


@pytest.mark.parametrize("field, value, allowed", [
    ("ring", "canary", "one of pilot, general, stable"),
    ("ring", True, "one of pilot, general, stable"),
    ("priority", 10, "one of interactive, background"),
    ("priority", "urgent", "one of interactive, background"),
])
def test_a_bad_ring_or_priority_is_refused_naming_the_key_and_what_is_allowed(
        mocks, field, value, allowed):
    raw = changed(gateway_raw(), (*ANA, field), value)
    assert allowed_for(mocks, raw, f"developers.ana.{field}", GATEWAY_SECRETS) == allowed


def test_the_stable_ring_is_refused_where_coder_does_not_route_to_the_fleet(mocks):
    raw = changed(gateway_raw(), (*ANA, "ring"), "stable")
    assert allowed_for(mocks, raw, "developers.ana.ring", GATEWAY_SECRETS) == (
        "pilot or general: the stable ring is served by the fleet's stable track alone, and"
        " gateway.coder.upstreams does not name vllmFleet")


def test_every_bad_ring_and_priority_is_reported_at_once():
    raw = changed(gateway_raw(), (*ANA, "ring"), "beta")
    raw = changed(raw, (*BOB, "priority"), "low")
    raw = changed(raw, (*BOB, "ring"), "all")
    with pytest.raises(ConfigError) as error:
        parse_stack(raw)
    assert [p.key for p in error.value.problems] == [
        "spear-fleet:developers.ana.ring", "spear-fleet:developers.bob.ring",
        "spear-fleet:developers.bob.priority"]


def test_the_keys_metadata_carries_who_it_is_and_what_the_gateway_stamps():
    developers = parse_stack(gateway_raw()).developers
    assert key_metadata(developers["ana"]) == {
        "developer": "ana", "team": "platform", "ring": "pilot", "priority": "interactive"}
    assert key_metadata(developers["bob"])["priority"] == "background"


def test_a_change_of_ring_or_priority_updates_the_key_in_place():
    ana = parse_stack(gateway_raw()).developers["ana"]
    olds = {"key_alias": "ana", "database": "d", "metadata": key_metadata(ana)}
    for field, value in (("ring", "general"), ("priority", "background")):
        news = {**olds, "metadata": {**olds["metadata"], field: value}}
        diff = GatewayKeyProvider().diff("ana", olds, news)
        assert diff.changes and not diff.replaces, field
