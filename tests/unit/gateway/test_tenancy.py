"""What the gateway stamps on a `coder` request (spear_gateway/tenancy.py): cache_salt, priority,
ring. The same rules on real LiteLLM: tests/integration/test_gateway_stamping.py."""

import pytest

from spear_gateway.tenancy import BadPriority, Tenant, ring_deployments, stamp, take_owned

ANA = Tenant.of("hash-ana", {"developer": "ana", "team": "platform"})
BOB = Tenant.of("hash-bob", {"developer": "bob", "team": "platform", "priority": "background"})
CY = Tenant.of("hash-cy", {"developer": "cy", "team": "data", "ring": "pilot"})
DEE = Tenant.of("hash-dee", {"developer": "dee"})
MASTER = Tenant.of("master-key", {})


def test_a_team_shares_one_salt_and_two_teams_never_do():
    assert ANA.cache_salt("team") == BOB.cache_salt("team")
    assert len({ANA.cache_salt("team"), CY.cache_salt("team"), DEE.cache_salt("team"),
                MASTER.cache_salt("team")}) == 4


def test_with_scope_developer_each_developer_has_a_salt_of_their_own():
    salts = {t.cache_salt("developer") for t in (ANA, BOB, CY, DEE, MASTER)}
    assert len(salts) == 5


def test_a_team_and_a_developer_of_the_same_name_never_share_a_salt():
    team = Tenant.of("k1", {"developer": "x", "team": "ana"})
    assert team.cache_salt("team") != ANA.cache_salt("developer")


def test_a_salt_is_stable_across_calls_and_keys_of_one_tenant():
    again = Tenant.of("another-key-of-ana", {"developer": "ana", "team": "platform"})
    assert ANA.cache_salt("team") == again.cache_salt("team") == ANA.cache_salt("team")
    assert len(ANA.cache_salt("team")) == 64 and int(ANA.cache_salt("team"), 16) >= 0


def test_an_unknown_scope_is_refused():
    with pytest.raises(ValueError, match="allowed are"):
        ANA.cache_salt("org")


def test_a_key_runs_at_its_class_priority_when_the_client_asks_nothing():
    assert (ANA.priority(), BOB.priority(), MASTER.priority()) == (0, 10, 0)


@pytest.mark.parametrize("tenant, asked, runs_at", [
    (BOB, 20, 20), (ANA, 20, 20), (BOB, 10, 10),    # lowering (a larger value): taken
    (BOB, 0, 10), (BOB, -100, 10), (ANA, -1, 0),    # raising: the class's value
])
def test_a_request_may_lower_its_own_priority_but_never_raise_it(tenant, asked, runs_at):
    assert tenant.priority(asked) == runs_at


@pytest.mark.parametrize("asked", ["20", 2.5, 10.0, True, [1], 2**31, -2**31])
def test_a_priority_that_is_not_an_integer_below_2_to_the_31_in_magnitude_is_refused_naming_what_is_allowed(asked):
    with pytest.raises(BadPriority) as refused:
        BOB.priority(asked)
    assert f"priority={asked!r}: allowed is an integer" in str(refused.value)
    assert "background class runs at 10" in str(refused.value)


def test_metadata_outside_what_the_config_allows_counts_as_the_default():
    odd = Tenant.of("k", {"developer": "eve", "ring": "beta", "priority": "urgent", "team": 7})
    assert (odd.ring, odd.priority_class, odd.team) == ("general", "interactive", None)


STABLE = {"model_info": {"id": "vllm-stable", "spear_track": "stable"}}
CANARY = {"model_info": {"id": "vllm-canary", "spear_track": "canary"}}
LOCAL = {"model_info": {"id": "local"}}
BARE = {"litellm_params": {"model": "openai/x"}}  # no model_info at all


def test_a_pilot_reaches_only_the_canary_while_one_is_there():
    assert ring_deployments("pilot", [STABLE, CANARY, LOCAL]) == [CANARY]


def test_a_pilot_reaches_the_others_when_no_canary_is_there():
    assert ring_deployments("pilot", [STABLE, LOCAL, BARE]) == [STABLE, LOCAL, BARE]


@pytest.mark.parametrize("ring", ["general", None])  # None: the master key, or no stamp
def test_every_other_request_never_reaches_a_canary(ring):
    assert ring_deployments(ring, [STABLE, CANARY, LOCAL, BARE]) == [STABLE, LOCAL, BARE]
    assert ring_deployments(ring, [CANARY]) == []


def test_a_deployment_given_as_an_object_is_read_by_its_model_info():
    class Deployment:
        model_info = {"spear_track": "canary"}
    found = Deployment()
    assert ring_deployments("pilot", [STABLE, found]) == [found]


VLLM_INFO = {"spear_cache_salt": True, "spear_priority": True}


def test_a_vllm_deployment_gets_the_gateways_salt_and_priority_over_the_clients():
    request = {"cache_salt": "mine", "priority": 0, "extra_body": {"cache_salt": "mine"}}
    stamp(request, VLLM_INFO, "salt", 10)
    assert request == {"cache_salt": "salt", "priority": 10, "extra_body": {}}


@pytest.mark.parametrize("info", [{}, {"spear_cache_salt": False, "spear_priority": False},
                                  {"spear_cache_salt": "yes"}])
def test_a_deployment_that_does_not_take_them_never_gets_either(info):
    request = {"model": "m", "cache_salt": "mine", "priority": 3,
               "extra_body": {"priority": 3, "top_k": 1}}
    stamp(request, info, "salt", 10)
    assert request == {"model": "m", "extra_body": {"top_k": 1}}


def test_a_deployment_may_take_the_salt_without_priority_scheduling():
    request = {"priority": 20}
    stamp(request, {"spear_cache_salt": True}, "salt", 20)
    assert request == {"cache_salt": "salt"}


def test_a_clients_fields_are_taken_out_wherever_it_put_them_and_its_priority_ask_returned():
    request = {"model": "coder", "cache_salt": "mine", "priority": 20,
               "extra_body": {"cache_salt": "mine", "priority": 0}}
    assert take_owned(request) == 20
    assert request == {"model": "coder", "extra_body": {}}
    assert take_owned({"model": "coder"}) is None


def test_the_stable_ring_reaches_the_fleets_stable_track_alone_canary_or_not():
    assert ring_deployments("stable", [STABLE, CANARY, LOCAL, BARE]) == [STABLE]
    assert ring_deployments("stable", [LOCAL, STABLE]) == [STABLE]
    assert Tenant.of("hash-gate", {"developer": "gate", "ring": "stable"}).ring == "stable"
