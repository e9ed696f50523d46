"""The master key and the provider keys exist only as secrets: the env file that holds them and
the SSH keys of the tunnels are secret in state, every developer key resource keeps the master
key and its own key secret, and config.yaml (a plain file, shown in diffs) names each credential
as `os.environ/<NAME>`, never its value.

What is checked is what the engine is told: the resource's additional secret outputs (the
engine encrypts those in state and masks them in previews) and config.yaml's text. A secret's
value itself reaches a policy unwrapped, so "is this value secret" is read from the former.
"""

from __future__ import annotations

from pulumi_policy import (EnforcementLevel, ReportViolation, ResourceValidationArgs,
                           ResourceValidationPolicy)

from policies.common import GatewayConfigView, for_gateway_config, for_type, gateway_config
from spear import tokens

SEED = ("seed 001 step 5 (the gateway holds every credential: the master key and the provider"
        " keys live in a secrets store, never in a file anyone can read)")
ENV_PREFIX = "os.environ/"
NO_KEY = "none"  # an upstream that demands no key (llama-server)

# type -> the properties that must be secret outputs
_SECRET_PROPERTIES = {
    tokens.GATEWAY_ENV: ("content",),
    tokens.TUNNEL_KEY: ("content",),
    tokens.GATEWAY_KEY: ("master_key", "key"),
}


def _secret_properties(token: tokens.Token):
    @for_type(token)
    def check(args: ResourceValidationArgs, report: ReportViolation) -> None:
        kept = set(args.opts.additional_secret_outputs or ())
        missing = [name for name in _SECRET_PROPERTIES[token] if name not in kept]
        if missing:
            report(f"{SEED}: {token.name} {args.name} keeps {', '.join(missing)} in plain text in"
                   " state and previews. Fix: declare them secret (HostResource's secret_inputs,"
                   " RemoteFileArgs(secret=True)) and pass them as Pulumi secrets.")
    return check


_CHECKS = [_secret_properties(token) for token in _SECRET_PROPERTIES]


@for_gateway_config
def _config_names_credentials_only(view: GatewayConfigView, report: ReportViolation) -> None:
    config = gateway_config(view.content)
    general = config.get("general_settings") or {}
    plain = [f"general_settings.{name}" for name in ("master_key", "database_url")
             if name in general and not str(general[name]).startswith(ENV_PREFIX)]
    for model in config.get("model_list") or []:
        key = (model.get("litellm_params") or {}).get("api_key")
        if key is not None and key != NO_KEY and not str(key).startswith(ENV_PREFIX):
            plain.append(f"model_list[{model.get('model_name')}].litellm_params.api_key")
    if plain:
        report(f"{SEED}: config.yaml holds {', '.join(plain)} as a value; config.yaml is a plain"
               " file, shown in every diff. Fix: give the secret to the stack (pulumi config set"
               f" --secret) and refer to it as {ENV_PREFIX}<NAME>, which the 0600 env file sets.")


def gateway_secrets_only_as_secrets(args: ResourceValidationArgs, report: ReportViolation) -> None:
    for check in (*_CHECKS, _config_names_credentials_only):
        check(args, report)


POLICY = ResourceValidationPolicy(
    name="gateway-secrets-only-as-secrets",
    description="The gateway's master key, provider keys and developer keys exist only as secrets.",
    validate=gateway_secrets_only_as_secrets,
    enforcement_level=EnforcementLevel.MANDATORY,
)
