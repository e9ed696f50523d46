"""A real LiteLLM proxy (localhosts/servers/litellm_proxy.py) with spear-fleet's hooks, in front of
the upstream and frontier stand-ins: the config.yaml and the files beside it as a gateway host
has them (hosts/gateway/spear_gateway/__init__.py says what they are).

The config here names the stand-ins' ports and prices chosen so a test knows what a request
costs; the gateway's own config.yaml comes from components/gateway/render.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from spear.rules import CODER_MODEL, FRONTIER_MODEL, HATCH_CALLBACK, RECEIPT_CALLBACK
from localhosts.servers.litellm_proxy import LitellmProxy

REPO = Path(__file__).resolve().parents[2]
FRONTIER_KEY = "sk-ant-spear-standin"


def gateway_config(upstream_url: str | dict[str, dict], frontier_url: str, *, hooks: bool = True,
                   coder_prices: tuple[float, float] = (0.0, 0.01),
                   frontier_prices: tuple[float, float] = (0.0, 1.0),
                   request_timeout: int = 3, num_retries: int = 0,
                   environment: dict[str, str] | None = None) -> str:
    """config.yaml: `coder` on the upstream stand-in, `frontier` on the frontier stand-in, each
    with (input, output) USD per token; with `hooks` spear-fleet's callbacks, without them
    stock LiteLLM (its own budget check only, no hatch). `upstream_url` may instead map each of
    several stand-ins' URLs to its deployment's model_info (the renderer's spear_* fields);
    `environment` goes to config.yaml's environment_variables."""
    def priced(params: dict, prices: tuple[float, float]) -> dict:
        return params | {"input_cost_per_token": prices[0], "output_cost_per_token": prices[1]}

    fleet = upstream_url if isinstance(upstream_url, dict) else {upstream_url: None}
    config = {
        "model_list": [
            *({"model_name": CODER_MODEL, "litellm_params": priced(
                {"model": "openai/spear-coder-standin", "api_base": url,
                 "api_key": "fleet-standin-key",
                 # As the gateway's config: Responses and Messages onto chat completions.
                 "use_chat_completions_api": True}, coder_prices)}
              | ({"model_info": info} if info is not None else {})
              for url, info in fleet.items()),
            {"model_name": FRONTIER_MODEL, "litellm_params": priced(
                {"model": "anthropic/claude-standin", "api_base": frontier_url,
                 "api_key": "os.environ/FRONTIER_API_KEY"}, frontier_prices)},
        ],
        "router_settings": {"num_retries": num_retries, "disable_cooldowns": True},
        "litellm_settings": {
            "request_timeout": request_timeout,
            "callbacks": [HATCH_CALLBACK, RECEIPT_CALLBACK, "prometheus"] if hooks else ["prometheus"],
            "budget_exceeded_status_code": 429,
            "use_chat_completions_url_for_anthropic_messages": True,
            # As the gateway's config: no fallback named in a coder error's message.
            "expose_router_debug_in_errors": False,
        },
        "general_settings": {"master_key": "os.environ/LITELLM_MASTER_KEY",
                             "enforce_fallback_model_access": False,
                             # As the gateway's config: the hooks' ledger holds the budgets.
                             **({"disable_budget_reservation": True,
                                 "cancel_on_disconnect": True} if hooks else {}),
                             # Spend lands in the database within a second (default 10 s),
                             # so a test reads it sooner.
                             "proxy_batch_write_at": 1},
        **({"environment_variables": environment} if environment else {}),
    }
    return yaml.safe_dump(config, sort_keys=False)


def hook_packages(log_dir: Path) -> dict[str, str]:
    """The hook package beside a proxy's config.yaml (in `log_dir`) and on its import path, as
    on the gateway host (spear/ too: the hatch's rule is spear.rules.escalates): the proxy's
    environment for it."""
    for package in ("spear_gateway", "spear"):
        link = log_dir / package
        if not link.exists():
            link.symlink_to(REPO / ("hosts/gateway" if package == "spear_gateway" else "") / package)
    return {"PYTHONPATH": str(log_dir)}


def spear_proxy(venv: Path, config_yaml: str, *, port: int, log_dir: Path,
                hatch_cap_usd: float, database_url: str | None = None) -> LitellmProxy:
    """The proxy with spear-fleet's hooks, as on the gateway host."""
    return LitellmProxy(venv, config_yaml, port=port, log_dir=log_dir, database_url=database_url,
                        env={**hook_packages(log_dir), "FRONTIER_API_KEY": FRONTIER_KEY,
                             "SPEAR_HATCH_MONTHLY_CAP_USD": str(hatch_cap_usd)})


def metric(proxy: LitellmProxy, name: str, **labels: str) -> float:
    """One sample from the proxy's /metrics (0 when absent), read with the master key."""
    import urllib.request
    req = urllib.request.Request(f"{proxy.base_url}/metrics/",
                                 headers={"Authorization": f"Bearer {proxy.master_key}"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        text = resp.read().decode()
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    pattern = re.compile(rf"^{re.escape(name)}(?:\{{([^}}]*)\}})? (\S+)$", re.M)
    for found in pattern.finditer(text):
        have = ",".join(sorted((found.group(1) or "").split(","))) if found.group(1) else ""
        if have == wanted:
            return float(found.group(2))
    return 0.0
