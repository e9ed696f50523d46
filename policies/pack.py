"""Every rule of the pack, family by family: the pack (policies/__main__.py) and the tests that
count or list its rules read this one tuple."""

from policies.endpoints import RULES as ENDPOINT_RULES
from policies.gateway import RULES as GATEWAY_RULES
from policies.inference import RULES as INFERENCE_RULES
from policies.kubernetes import RULES as KUBERNETES_RULES
from policies.vllm import RULES as VLLM_RULES

RULES = (*INFERENCE_RULES, *ENDPOINT_RULES, *VLLM_RULES, *GATEWAY_RULES, *KUBERNETES_RULES)
