"""vLLM's API key reaches its container only from a Kubernetes Secret (`valueFrom.secretKeyRef`),
never as a literal value in the Deployment (readable by anyone who can read Deployments) and
never on the command line (readable by anyone who lists processes)."""

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy

from policies.common import for_type, vllm_containers
from spear import tokens
from spear.vllm import API_KEY_ENV, API_KEY_FLAG, key_on_command_line

SEED = "seed 001 steps 1 and 3 (the vLLM key lives in a secrets store, exported as VLLM_API_KEY)"


@for_type(tokens.K8S_DEPLOYMENT)
def k8s_api_key_from_secret(args: ResourceValidationArgs, report: ReportViolation) -> None:
    for container, argv in vllm_containers(args.props):
        name = container["name"]
        if key_on_command_line(argv):
            report(f"{SEED}: container {name} has {API_KEY_FLAG} on its command line. Fix: leave"
                   f" it out; vLLM reads {API_KEY_ENV} from its environment.")
        entries = [e for e in container.get("env") or () if e["name"] == API_KEY_ENV]
        if not entries:
            report(f"{SEED}: container {name} has no {API_KEY_ENV}: vLLM would serve anyone. Fix:"
                   " set it from the fleet's Secret (secretKeyRef).")
        for entry in entries:
            ref = (entry.get("valueFrom") or {}).get("secretKeyRef")
            if entry.get("value") is not None or not ref:
                report(f"{SEED}: container {name} gets {API_KEY_ENV}"
                       f" {'as a literal value' if entry.get('value') is not None else 'not from a Secret'}."
                       " Fix: valueFrom.secretKeyRef to the Secret fed by the stack's vllmApiKey.")


POLICY = ResourceValidationPolicy(
    name="k8s-api-key-from-secret",
    description="VLLM_API_KEY comes from a Secret (secretKeyRef), never a literal or argv.",
    validate=k8s_api_key_from_secret,
    enforcement_level=EnforcementLevel.MANDATORY,
)
