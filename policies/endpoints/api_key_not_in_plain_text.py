"""No API key in plain text: vLLM's key is never on its command line, it reaches vLLM through an
environment file only root can read, and no key is in the pod's RunPod environment.

A command line is readable by anyone who can list processes on the pod, and the pod's env is
shown by RunPod's console and returned by its API in clear; the keys are Pulumi secrets until
they reach the file vLLM reads.
"""

import re

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy

from policies.common import for_type
from spear import tokens
from spear.vllm import API_KEY_ENV, API_KEY_FILE_MODE, API_KEY_FLAG, key_on_command_line

SEED = "seed 001 steps 1 and 3 (the vLLM key lives in a secrets store, exported as VLLM_API_KEY)"
_SECRET_NAME = re.compile(r"API_KEY|TOKEN|SECRET|PASSWORD", re.IGNORECASE)


@for_type(tokens.POD_VLLM)
def _vllm_key_in_environment_only(args: ResourceValidationArgs, report: ReportViolation) -> None:
    props = args.props
    argv = list(props["command_line"])
    key = props["api_key"]
    if key_on_command_line(argv) or (key and any(key in arg for arg in argv)):
        report(f"{SEED}: the API key is on vLLM's command line ({API_KEY_FLAG} or its value),"
               " where anyone listing processes reads it. Fix: leave it out; vLLM reads"
               f" {API_KEY_ENV} from its environment file.")
    env_file = props["env_file"]
    if env_file["variable"] != API_KEY_ENV or int(env_file["mode"]) != API_KEY_FILE_MODE:
        report(f"{SEED}: the key reaches vLLM as {env_file['variable']} in a file of mode"
               f" {int(env_file['mode']):o}; it must be {API_KEY_ENV} in a file of mode"
               f" {API_KEY_FILE_MODE:o}."
               " Fix: keep the pod's vllm.env as PodVllm writes it.")


@for_type(tokens.RUNPOD_POD)
def _no_key_in_pod_env(args: ResourceValidationArgs, report: ReportViolation) -> None:
    env = dict(args.props["env"])
    key = args.props["api_key"]
    named = sorted(name for name in env if _SECRET_NAME.search(name))
    if named or (key and key in env.values()):
        report(f"{SEED}: the pod's environment holds {', '.join(named) or 'the RunPod API key'},"
               " which RunPod shows and returns in clear. Fix: keep keys out of the pod's env;"
               f" vLLM's key goes to its environment file ({API_KEY_ENV}), over SSH.")


def api_key_not_in_plain_text(args: ResourceValidationArgs, report: ReportViolation) -> None:
    _vllm_key_in_environment_only(args, report)
    _no_key_in_pod_env(args, report)


POLICY = ResourceValidationPolicy(
    name="api-key-not-in-plain-text",
    description="No API key on vLLM's command line or in the pod's RunPod environment.",
    validate=api_key_not_in_plain_text,
    enforcement_level=EnforcementLevel.MANDATORY,
)
