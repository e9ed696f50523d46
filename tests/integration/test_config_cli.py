"""Stack config edited the Pulumi way: `pulumi config set --path` (the real CLI) writes scalars
as text, with or without --type, and the config takes a number or a boolean written so where the
text is exactly one, and still refuses text that is not, naming the key."""

from __future__ import annotations

import pytest
import yaml

from config.checker import ConfigError
from config.load import parse_stack
from localhosts.engine import Project, engine_env
from tests.support.config_cases import BACKUP_KEY, MASTER_KEY
from tests.support.stack_files import stack_raw, tls_pair, with_placeholder_keys, without_fleet

STACK = "cli"


@pytest.fixture
def project(tmp_path):
    proj = Project(tmp_path, engine_env())
    raw = with_placeholder_keys(without_fleet(stack_raw("local")))
    proj.new_stack(STACK, {k: v for k, v in raw.items() if k in (
        "inferenceHosts", "gateway", "developers")})
    return proj


def cli(project: Project, path: str, value: str, *kind: str) -> None:
    project.pulumi("config", "set", "--path", "--stack", STACK, f"spear-fleet:{path}", value, *kind)


def written(project: Project) -> dict:
    """The stack's config as the CLI left it, with the secrets the local stack holds (as text)."""
    doc = yaml.safe_load((project.dir / "stacks" / f"Pulumi.{STACK}.yaml").read_text())
    config = {key.removeprefix("spear-fleet:"): value for key, value in doc["config"].items()}
    return with_placeholder_keys({**config, "gatewayMasterKey": MASTER_KEY,
                                  "frontierApiKey": "sk-frontier-placeholder",
                                  "gatewayBackupKey": BACKUP_KEY,
                                  # its HTTPS listener's pair (the stack's are its secrets)
                                  **tls_pair(config["gateway"]["listen"]["tls"]["name"])})


@pytest.mark.parametrize("kind", [(), ("--type", "float")], ids=["no type", "--type float"])
def test_a_budget_in_dollars_and_cents_set_with_the_cli_is_that_amount(project, kind):
    cli(project, "developers.cyn.maxBudget", "12.5", *kind)
    cli(project, "gateway.hatch.alertUsd", "12", *kind)
    raw = written(project)
    # What the CLI writes: text without a type (pulumi 3.274.1 writes a float with --type float).
    assert raw["developers"]["cyn"]["maxBudget"] == ("12.5" if not kind else 12.5)
    config = parse_stack(raw)
    assert config.developers["cyn"].max_budget == 12.5
    assert config.gateway.hatch.alert_usd == 12.0


def test_integers_and_booleans_set_with_the_cli_are_taken_and_other_text_is_refused(project):
    cli(project, "inferenceHosts.local.server.threads", "4")
    cli(project, "developers.cyn.rotation", "1", "--type", "int")
    cli(project, "inferenceHosts.local.model.moe", "true")
    config = parse_stack(written(project))
    assert config.inference_hosts["local"].server.threads == 4
    assert (config.developers["cyn"].rotation, config.inference_hosts["local"].model.moe) == (1, True)
    cli(project, "developers.cyn.maxBudget", "12,50")
    with pytest.raises(ConfigError) as refused:
        parse_stack(written(project))
    assert "developers.cyn.maxBudget: got '12,50'; allowed: an amount in USD greater than 0" \
        in str(refused.value)
