"""spear-fleet's code inside the gateway: LiteLLM proxy callbacks for the 429/5xx-only hatch, for
budgets that hold (seed 001 step 5), and for what the gateway stamps on every
`coder` request: cache_salt, priority and the ring of deployments it may reach (seed 001, "How to
run it in production"). How it works: litellm_hooks.py; the rules: tenancy.py.

What the gateway host and its config.yaml need (for the renderer)
-----------------------------------------------------------------
Files. This package (hosts/gateway/spear_gateway/) is copied into the folder that holds
config.yaml, e.g. /opt/spear-gateway/config.yaml and /opt/spear-gateway/spear_gateway/, and
that folder is on the LiteLLM virtualenv's import path: a one-line
`<venv>/lib/python3.X/site-packages/spear_gateway.pth` holding `/opt/spear-gateway` (or
`PYTHONPATH=/opt/spear-gateway` in the unit). Both are needed: LiteLLM 1.91.1 loads a
callback from the file `spear_gateway/callbacks.py` next to config.yaml, and that file imports
the package by name. `spear/__init__.py`, `spear/rules.py` and `spear/receipts.py` go beside it
too (the hatch's rule, spear.rules.escalates, is the one the policy pack uses; the receipts are
the ones the config check verifies). Its Python dependencies are in hosts/gateway/requirements.txt
(psycopg[binary], psycopg-pool, prometheus-client).

config.yaml:

    model_list:
      - model_name: coder                      # = SPEAR_FLEET_MODEL
        litellm_params:
          model: openai/<served model>
          api_base: http://127.0.0.1:<tunnel port>/v1
          api_key: os.environ/FLEET_API_KEY
          input_cost_per_token: <USD>            # budgets are priced with these: without
          output_cost_per_token: <USD>           # prices a request's worst case is ~0
        model_info:
          id: <route>                            # e.g. local, vllm-stable, vllm-canary
          spear_track: stable | canary           # the Kubernetes fleet's routes only
          spear_cache_salt: true                 # a vLLM fleet: takes cache_salt
          spear_priority: true                   # vLLM with --scheduling-policy priority
                                                 # (absent/false: the field is never sent)
          spear_pods: {namespace: vllm, service: vllm, port: 8000}  # prefix-affinity routing:
                                                 # the hook picks the Service's pod (pods.py)
      - model_name: frontier                   # = SPEAR_HATCH_MODEL
        litellm_params:
          model: anthropic/<model>
          api_key: os.environ/FRONTIER_API_KEY
          input_cost_per_token: <USD>            # the hatch's cap is priced with these
          output_cost_per_token: <USD>
    router_settings:                           # no `fallbacks` here (nor in litellm_settings):
      num_retries: <n>                         # the hook gives each coder request its hatch
      disable_cooldowns: true                  # required, see below
    litellm_settings:
      callbacks: ["spear_gateway.callbacks.proxy_handler_instance",
                  "spear_gateway.receipts.receipt_signer", "prometheus"]
      request_timeout: <s>                     # a fleet that does not answer within it escalates
    environment_variables:                     # or Environment= in the unit; read once at
                                               # start-up, a bad value stops it (settings.py)
      SPEAR_HATCH_MONTHLY_CAP_USD: "<gateway.hatch.monthlyCapUsd>"  # required, USD >= 0
      SPEAR_FLEET_MODEL: "coder"               # default coder
      SPEAR_HATCH_MODEL: "frontier"            # default frontier
      SPEAR_DEFAULT_MAX_TOKENS: "4096"         # set on a request that sets no output limit
      SPEAR_HOLD_TTL_SECONDS: "3600"           # a hold never settled (a process that died
                                               # mid-request) is charged in full after it
      SPEAR_CACHE_SALT_SCOPE: "team"           # team (default) or developer
    # With spear_pods, in the env file (the token is a secret): SPEAR_FLEET_API_SERVER (https),
    # SPEAR_FLEET_API_CA (base64 PEM) and SPEAR_FLEET_API_TOKEN, which lists EndpointSlices and
    # pods.
    general_settings:
      master_key: os.environ/LITELLM_MASTER_KEY
      enforce_fallback_model_access: false     # 1.108+: else a key scoped to coder never
                                               # reaches the hatch (the hook guards frontier)

Why `disable_cooldowns: true`: with cooldowns on, LiteLLM takes a deployment out after a 401 or
404 even when it is the group's only one (router_utils/cooldown_handlers.py 1.91.1
_is_cooldown_required and _should_cooldown_deployment, `_should_retry(...) is False`): measured
on 1.91.1, one developer's request that the fleet answered 404 made every `coder` request of
every developer fail with "No deployments available" for the next 5 s, neither served nor
escalated (no call was made, so there is no fleet status to classify, and escalating it would
let a client error spend the hatch).

The ledger's database: `SPEAR_BUDGET_DATABASE_URL`, else `DATABASE_URL` (the gateway's own
PostgreSQL; a secret, in the unit's environment file, never in config.yaml). Its tables live in
the schema `spear_gateway`, created on first use; Prisma's URL parameters (`?schema=...`) are
accepted. With neither variable set (config-only mode) the ledger lives in the process: fine for
the hatch's cap on one process, and there are no keys to budget.

What developers see:
- over the key's budget (settled spend + requests in flight + this one's worst case): HTTP 429,
  error type `spear_budget_exceeded`;
- the fleet answered 400/401/404/422 (any non-429 4xx): that error, unchanged, and the frontier
  is never called (LiteLLM itself turns an upstream 422 into 400 BadRequestError);
- the fleet answered 429/5xx or did not answer: the frontier's answer; over the hatch's monthly
  cap (counting escalations in flight): HTTP 429, error type `hatch_budget_exhausted`;
- `frontier` asked for directly: HTTP 403, error type `hatch_not_direct`;
- a `priority` that is not an integer of magnitude below 2**31: HTTP 400, error type
  `spear_bad_priority`, before anything is sent or held. A valid one larger than the key's class
  (interactive 0, background 10; the key's metadata `priority`) serves the request later; a
  smaller one counts as the class's. A client's `cache_salt` is always replaced (or removed).
The keys' metadata (components/gateway/keys.py) carry `developer`, `team`, `ring` (`pilot`:
served by the canary deployments while one is up; otherwise never by them) and `priority`.
LiteLLM's own `dynamic_rate_limiter` callback reads the same metadata `priority`; it is not loaded.
An escalated answer is charged to the key's ledger at the fleet's prices (the developer asked for
`coder`) and to the hatch's cap at the frontier's; LiteLLM's own key spend records the frontier's
cost, so its own budget check may refuse a key somewhat earlier than spear-fleet's ledger would.

Metrics on LiteLLM's /metrics (prometheus_client's default registry; 1.91.1 serves /metrics to
the master key): `spear_hatch_escalations_total{status="429"|"500"|"503"|...|"timeout"|
"connection"}`, `spear_hatch_rejections_total{status}`, `spear_hatch_cap_usd`,
`spear_budget_rejections_total`, `spear_budget_settled_above_hold_total`,
`spear_budget_holds_expired_then_settled_total`, `spear_fleet_ttft_seconds{priority}` (a
histogram of the fleet's time to first token by stamped priority); and, read from the database at each scrape
(exporter.py, the same on every replica), `spear_hatch_spend_usd` (this month's, for the spend
alert), `spear_budget_holds_in_flight`, `spear_developer_spend_usd{developer,team}`,
`spear_developer_budget_usd{developer,team}`, `spear_developer_tokens_total{developer,team,kind}`;
and `spear_edit_decisions_total{developer,team,harness,tool,decision,source}`, the edit decisions
harnesses report to `POST /spear/harness-telemetry` with a developer's key (edits.py: diff
acceptance; the hook adds that route to LiteLLM's app).
"""
