"""The hooks' settings: defaults from spear.rules, every bad value named at once."""

import pytest

from spear_gateway.settings import Settings


def test_only_the_hatch_cap_is_required_and_the_database_defaults_to_litellms():
    settings = Settings.from_environment({"SPEAR_HATCH_MONTHLY_CAP_USD": "20",
                                          "DATABASE_URL": "postgresql://gw"})
    assert settings == Settings(fleet_model="coder", hatch_model="frontier", hatch_cap_usd=20.0,
                                database_url="postgresql://gw", default_max_tokens=4096)


def test_the_budget_database_may_be_its_own():
    settings = Settings.from_environment({"SPEAR_HATCH_MONTHLY_CAP_USD": "0",
                                          "SPEAR_BUDGET_DATABASE_URL": "postgresql://budgets",
                                          "DATABASE_URL": "postgresql://gw"})
    assert settings.database_url == "postgresql://budgets" and settings.hatch_cap_usd == 0.0


def test_every_bad_setting_is_named_with_what_is_allowed_at_once():
    with pytest.raises(ValueError) as refused:
        Settings.from_environment({"SPEAR_HATCH_MONTHLY_CAP_USD": "-1",
                                   "SPEAR_DEFAULT_MAX_TOKENS": "0",
                                   "SPEAR_HATCH_MODEL": "coder"})
    message = str(refused.value)
    assert "SPEAR_HATCH_MONTHLY_CAP_USD='-1': allowed is a number of USD >= 0" in message
    assert "SPEAR_DEFAULT_MAX_TOKENS='0': allowed is an integer >= 1" in message
    assert "SPEAR_HATCH_MODEL='coder': allowed is a model other than the fleet's" in message


@pytest.mark.parametrize("cap", [None, "twenty", "inf", "nan"])
def test_a_missing_or_unusable_hatch_cap_is_refused(cap):
    env = {} if cap is None else {"SPEAR_HATCH_MONTHLY_CAP_USD": cap}
    with pytest.raises(ValueError, match="SPEAR_HATCH_MONTHLY_CAP_USD"):
        Settings.from_environment(env)


def test_a_hold_ttl_shorter_than_a_minute_is_refused():
    with pytest.raises(ValueError, match="SPEAR_HOLD_TTL_SECONDS='5': allowed is an integer >= 60"):
        Settings.from_environment({"SPEAR_HATCH_MONTHLY_CAP_USD": "1", "SPEAR_HOLD_TTL_SECONDS": "5"})


def test_the_cache_salt_scope_is_team_unless_set_to_developer():
    env = {"SPEAR_HATCH_MONTHLY_CAP_USD": "20"}
    assert Settings.from_environment(env).cache_salt_scope == "team"
    assert Settings.from_environment(
        env | {"SPEAR_CACHE_SALT_SCOPE": "developer"}).cache_salt_scope == "developer"


def test_an_unknown_cache_salt_scope_is_refused_naming_what_is_allowed():
    with pytest.raises(ValueError) as refused:
        Settings.from_environment({"SPEAR_HATCH_MONTHLY_CAP_USD": "20",
                                   "SPEAR_CACHE_SALT_SCOPE": "org"})
    assert "SPEAR_CACHE_SALT_SCOPE='org': allowed are team, developer" in str(refused.value)
