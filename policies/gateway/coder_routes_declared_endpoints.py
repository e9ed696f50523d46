"""`coder` routes only to the endpoints the stack declares, each through its own tunnel.

What is checked, all of it known at preview: the gateway config's `upstreams` (on a host or in
the cluster: policies/common.py::gateway_config_view) names only
endpoints declared in the stack (inference hosts, RunPod endpoints and REDS endpoints: their
component resources, by name); every upstream has its GatewayTunnel unit
(spear-tunnel-<endpoint>.service) whose health port is the backend's client port; and every
`coder` deployment in config.yaml is one of those upstreams (model_info.id) reached at
http://127.0.0.1:<that tunnel's client port>/v1. The Kubernetes fleet (upstream `vllmFleet`, a
VllmFleet component in the stack) is reached without a tunnel: each of its routes `vllm-<track>`
must go to http://<cluster IP>:<port>/v1 of that track's Service in the stack. So no deployment
can send developers' code to a host the stack does not declare, nor to another endpoint's port.
"""

from __future__ import annotations

import re

from pulumi_policy import (EnforcementLevel, ReportViolation, StackValidationArgs,
                           StackValidationPolicy)

from policies.common import (GatewayConfigView, gateway_config, gateway_config_view,
                             unknown_is_violation)
from spear import tokens
from spear.fleet import APP, TRACK
from spear.rules import CODER_MODEL, FLEET_UPSTREAM, tunnel_unit

SEED = ("seed 001 step 5 (`coder` is the fleet: the gateway routes it to the endpoints you run,"
        " through their tunnels)")
ENDPOINT_TYPES = (tokens.INFERENCE_HOST, tokens.RUNPOD_ENDPOINT, tokens.REDS_ENDPOINT)
_API_BASE = re.compile(r"http://127\.0\.0\.1:([0-9]+)/v1/?")
FLEET_ROUTE = re.compile(r"vllm-([a-z]+)")


def coder_routes_declared_endpoints(args: StackValidationArgs, report: ReportViolation) -> None:
    with unknown_is_violation(report):
        declared = sorted(r.name for r in args.resources if r.resource_type in ENDPOINT_TYPES)
        if any(r.resource_type == tokens.VLLM_FLEET for r in args.resources):
            declared.append(FLEET_UPSTREAM)
        # The tunnel units' client ports, by unit name.
        tunnels = {str(r.props["unit"]): int(r.props["health"]["port"]) for r in args.resources
                   if r.resource_type == tokens.GATEWAY_TUNNEL.type}
        # The fleet's Services: track -> the http://<cluster IP>:<port>/v1 bases they answer at.
        services: dict[str, set[str]] = {}
        for r in args.resources:
            labels = (r.props.get("metadata") or {}).get("labels") or {} \
                if r.resource_type == tokens.K8S_SERVICE.type else {}
            if labels.get("app") == APP and TRACK in labels:
                spec = r.props.get("spec") or {}
                services.setdefault(str(labels[TRACK]), set()).update(
                    f"http://{spec.get('clusterIP')}:{int(port['port'])}/v1" for port in spec.get("ports") or [])
        for view in (gateway_config_view(r.resource_type, r.props, r.name) for r in args.resources):
            if view is not None:
                _check(view, declared, tunnels, services, report)


def _check(view: GatewayConfigView, declared: list[str], tunnels: dict[str, int],
           services: dict[str, set[str]], report: ReportViolation) -> None:
    upstreams = [str(name) for name in view.facts["upstreams"]]
    fix = (" Fix: name only declared endpoints in gateway.coder.upstreams (declared: "
           + (", ".join(declared) or "none") + ") and let spear-fleet render config.yaml.")
    for name in upstreams:
        if name not in declared:
            report(f"{SEED}: {view.name} routes {CODER_MODEL} to {name!r}, which the stack"
                   " does not declare." + fix)
        elif name != FLEET_UPSTREAM and tunnel_unit(name) not in tunnels:
            report(f"{SEED}: {view.name} routes {CODER_MODEL} to {name!r} but the gateway"
                   f" has no {tunnel_unit(name)} reaching it." + fix)
    config = gateway_config(view.content)
    for i, model in enumerate(config.get("model_list") or []):
        if model.get("model_name") != CODER_MODEL:
            continue
        endpoint = (model.get("model_info") or {}).get("id")
        api_base = str((model.get("litellm_params") or {}).get("api_base"))
        where = f"config.yaml model_list[{i}] ({CODER_MODEL}, id {endpoint!r}, {api_base})"
        port = _API_BASE.fullmatch(api_base)
        fleet_route = FLEET_ROUTE.fullmatch(str(endpoint))
        if fleet_route and FLEET_UPSTREAM in upstreams:
            track = fleet_route.group(1)
            if api_base.rstrip("/") not in services.get(track, set()):
                report(f"{SEED}: {where} does not go to the fleet's {track} Service (at "
                       f"{', '.join(sorted(services.get(track, set()))) or 'none in the stack'})." + fix)
            continue
        if endpoint not in upstreams:
            report(f"{SEED}: {where} is not one of the upstreams ({', '.join(upstreams)})." + fix)
            continue
        client_port = tunnels.get(tunnel_unit(endpoint))
        # (An upstream without its tunnel is reported above.)
        if client_port is not None and (port is None or int(port.group(1)) != client_port):
            report(f"{SEED}: {where} does not go to 127.0.0.1:{client_port}/v1, where"
                   f" {tunnel_unit(endpoint)} forwards to that endpoint." + fix)


POLICY = StackValidationPolicy(
    name="coder-routes-declared-endpoints",
    description="`coder` routes only to endpoints the stack declares, through their tunnels.",
    validate=coder_routes_declared_endpoints,
    enforcement_level=EnforcementLevel.MANDATORY,
)
