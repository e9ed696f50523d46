"""The gateway's placements (components/gateway/__init__.py): one component per placement, each
in its own module with the same shape, chosen by the typed config; the program composes a
gateway without asking where it runs."""

from __future__ import annotations

import ast
import inspect

from components.gateway import PLACEMENTS, GatewayArgs, cluster, host
from config.load import parse_stack
from tests.support.config_cases import gateway_raw, seats_raw
from tests.support.stack_files import REPO


def test_each_placement_is_a_component_of_gatewayargs_and_says_where_its_metrics_are():
    assert set(PLACEMENTS) == {"host", "kubernetes"}
    for placement in PLACEMENTS.values():
        params = inspect.signature(placement.component.__init__).parameters
        assert list(params) == ["self", "name", "args", "opts"]
        assert params["args"].annotation in ("GatewayArgs", GatewayArgs)
        assert list(inspect.signature(placement.metrics_target).parameters) == ["config"]
    assert PLACEMENTS["host"].component is host.HostGateway
    assert PLACEMENTS["kubernetes"].component is cluster.ClusterGateway


def test_the_typed_config_chooses_the_placement_and_its_metrics_target():
    on_host = parse_stack(gateway_raw()).gateway
    in_cluster = parse_stack(seats_raw()).gateway
    assert (on_host.placement, in_cluster.placement) == ("host", "kubernetes")
    assert PLACEMENTS[on_host.placement].metrics_target(on_host).address == \
        f"{on_host.host}:{on_host.port}"
    assert PLACEMENTS[in_cluster.placement].metrics_target(in_cluster).namespace == \
        in_cluster.kubernetes.namespace


def test_the_program_names_no_placement():
    tree = ast.parse((REPO / "__main__.py").read_text())
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)} | {
        alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
        for alias in node.names}
    attributes = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    assert not names & {"HostGateway", "ClusterGateway"}
    assert "placement" not in attributes
    assert not any(isinstance(node, ast.Attribute) and node.attr == "kubernetes"
                   and isinstance(node.value, ast.Name) and node.value.id == "gateway_cfg"
                   for node in ast.walk(tree))
