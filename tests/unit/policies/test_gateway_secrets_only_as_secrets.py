import yaml

from policies.gateway.gateway_secrets_only_as_secrets import POLICY
from spear import tokens
from tests.support.policy_harness import UNKNOWN, check_resource, prod

SEED = "seed 001 step 5 (the gateway holds every credential"


def test_the_env_file_tunnel_keys_and_developer_keys_kept_secret_and_config_naming_env_vars_pass():
    for token in (tokens.GATEWAY_ENV, tokens.TUNNEL_KEY, tokens.GATEWAY_KEY, tokens.GATEWAY_CONFIG):
        assert check_resource(POLICY, token, prod(token)) == [], token


def test_an_env_file_whose_content_is_not_secret_is_a_violation():
    [message] = check_resource(POLICY, tokens.GATEWAY_ENV, prod(tokens.GATEWAY_ENV),
                               secret_outputs=["connection"])
    assert message.startswith(SEED)
    assert "GatewayEnv gateway-env keeps content in plain text in state and previews" in message
    assert "Fix: declare them secret" in message


def test_a_developer_key_whose_master_key_and_key_are_not_secret_is_a_violation():
    [message] = check_resource(POLICY, tokens.GATEWAY_KEY, prod(tokens.GATEWAY_KEY),
                               secret_outputs=["connection"])
    assert "GatewayKey gateway-key-ana keeps master_key, key in plain text" in message


def test_a_master_key_written_into_config_yaml_is_a_violation():
    props = prod(tokens.GATEWAY_CONFIG)
    config = yaml.safe_load(props["content"])
    config["general_settings"]["master_key"] = "sk-master-PLACEHOLDER"
    config["model_list"][-1]["litellm_params"]["api_key"] = "sk-ant-PLACEHOLDER"
    props["content"] = yaml.safe_dump(config)
    [message] = check_resource(POLICY, tokens.GATEWAY_CONFIG, props)
    assert message.startswith(SEED)
    assert ("config.yaml holds general_settings.master_key,"
            " model_list[frontier].litellm_params.api_key as a value") in message
    assert "refer to it as os.environ/<NAME>" in message


def test_an_unknown_config_cannot_pass():
    props = prod(tokens.GATEWAY_CONFIG)
    props["content"] = UNKNOWN
    [message] = check_resource(POLICY, tokens.GATEWAY_CONFIG, props)
    assert "content can't be known during preview" in message
