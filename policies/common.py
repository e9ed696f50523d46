"""What the rules share: recognising spear-fleet resources, reading llama-server's command line,
and never letting a value that preview cannot know pass a rule unnoticed.

A resource is recognised by its type token (spear/tokens.py). The engine hands policies JSON
values: numbers arrive as floats (a port is 8010.0), so rules compare them as integers.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from pulumi_policy import ReportViolation, ResourceValidationArgs
from pulumi_policy.proxy import UnknownValueError

from spear import tokens
from spear.rules import APP_LABEL, GATEWAY_APP, GATEWAY_FACTS_ANNOTATION, IMAGE
from spear.tokens import Token

Check = Callable[[ResourceValidationArgs, ReportViolation], None]


@contextlib.contextmanager
def unknown_is_violation(report: ReportViolation) -> Iterator[None]:
    """Reports a value that is unknown at preview as a violation.

    pulumi-policy turns the UnknownValueError its property proxy raises into an advisory note,
    so a mandatory rule would let the preview pass without having checked anything.
    """
    try:
        yield
    except UnknownValueError as err:
        report(f"{err.message}, so this rule cannot be verified at preview. Fix: make the value "
               "known before the update (a plain value from the stack config, not an output of "
               "another resource).")


def for_type(token: Token) -> Callable[[Check], Check]:
    """Makes `check(args, report)` a resource validation that runs on resources of one type."""
    def decorate(check: Check) -> Check:
        @functools.wraps(check)
        def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
            if args.resource_type == token.type:
                with unknown_is_violation(report):
                    check(args, report)
        return validate
    return decorate


# llama-server's command line, as serve.sh produces it (the server-conf resource's
# `command_line`: argv[0] is "llama-server").


def flag_values(argv: Sequence[str], *names: str) -> list[str]:
    """The values given to a flag under any of its names (`--ctx-size 8192`, `-c 8192`,
    `--ctx-size=8192`), in command-line order."""
    values = []
    for i, arg in enumerate(argv):
        name, eq, inline = arg.partition("=")
        if name not in names:
            continue
        if eq:
            values.append(inline)
        elif i + 1 < len(argv):
            values.append(argv[i + 1])
    return values


def flag_value(argv: Sequence[str], *names: str) -> str | None:
    """The value llama-server uses for a flag: the last one given (None when absent)."""
    values = flag_values(argv, *names)
    return values[-1] if values else None


def switch_on(argv: Sequence[str], on: str, off: str) -> bool:
    """Whether an on/off switch (`--jinja` / `--no-jinja`) ends up on: the last one wins."""
    state = False
    for arg in argv:
        if arg in (on, off):
            state = arg == on
    return state


def integer(text: Any) -> int | None:
    """A decimal integer setting (server.conf values are strings); None when it is not one."""
    return int(text) if isinstance(text, str) and text.isdigit() else None


# The gateway's config.yaml, as LiteLLM reads it: the GatewayConfig resource's `content` on a
# gateway host; in the cluster, the gateway ConfigMap's `config.yaml`, with the same facts as a
# JSON annotation (components/gateway/cluster_manifests.py).



@dataclass(frozen=True)
class GatewayConfigView:
    name: str
    content: Any  # config.yaml's text
    facts: Any  # upstreams, litellm_version, hatch (from, to, monthly_cap_usd, alert_usd)


def gateway_config_view(resource_type: str, props: Any, name: str) -> GatewayConfigView | None:
    """The gateway's config in a resource of either placement; None for any other resource."""
    if resource_type == tokens.GATEWAY_CONFIG.type:
        return GatewayConfigView(name, props["content"], props)
    if resource_type != tokens.K8S_CONFIG_MAP.type:
        return None
    metadata = props.get("metadata") or {}
    if (metadata.get("labels") or {}).get(APP_LABEL) != GATEWAY_APP \
            or "config.yaml" not in (props.get("data") or {}):
        return None
    # A gateway ConfigMap without its facts is read as facts that say nothing: fail closed.
    facts = json.loads((metadata.get("annotations") or {}).get(GATEWAY_FACTS_ANNOTATION) or "{}")
    return GatewayConfigView(name, props["data"]["config.yaml"],
                             {"upstreams": [], "hatch": {"from": None, "to": None,
                                                         "monthly_cap_usd": None,
                                                         "alert_usd": None}, **facts})


def for_gateway_config(check: Callable[[GatewayConfigView, ReportViolation], None]) -> Check:
    """Makes `check(view, report)` a resource validation of the gateway's config, wherever the
    gateway runs."""
    @functools.wraps(check)
    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        with unknown_is_violation(report):
            view = gateway_config_view(args.resource_type, args.props, args.name)
            if view is not None:
                check(view, report)
    return validate


def gateway_config(content: Any) -> dict[str, Any]:
    """config.yaml's text as a mapping ({} when it is not one: each rule then finds what it
    requires missing)."""
    config = yaml.safe_load(str(content))
    return config if isinstance(config, dict) else {}
# vLLM's command line, on a RunPod pod or in a Deployment's containers (the vLLM fleet).


def containers(deployment_props: Any) -> list[Any]:
    """The containers of a Deployment's pod template."""
    return list(deployment_props["spec"]["template"]["spec"]["containers"])


def image_tag(container: Any) -> str | None:
    """The tag of a container's image (for vLLM, the engine version); None when it has none."""
    match = IMAGE.fullmatch(str(container.get("image")))
    return match["tag"] if match else None


def serve_argv(container: Any) -> list[str] | None:
    """The container's `vllm serve ...` command line (command, then args); None for a container
    that does not run vLLM."""
    argv = [*(container.get("command") or ()), *(container.get("args") or ())]
    return argv if argv[:2] == ["vllm", "serve"] else None


def vllm_containers(deployment_props: Any) -> list[tuple[Any, list[str]]]:
    """(container, its serve command line) for each container of the Deployment that runs vLLM."""
    return [(c, argv) for c in containers(deployment_props) if (argv := serve_argv(c)) is not None]


@dataclass(frozen=True)
class VllmCommand:
    """One `vllm serve` command line, wherever it runs: what it is called in a message (`pod
    gpu-vllm`, `container vllm`), its argv and its engine version (the image's tag; None when
    the image has none)."""
    target: str
    argv: list[str]
    engine_tag: str | None


def vllm_commands(resource_type: str, props: Any, name: str) -> list[VllmCommand]:
    """The vLLM command lines of a resource of any target: a RunPod pod's vLLM (its
    `command_line`, its pod's image) or each vLLM container of a Deployment; [] for others."""
    if resource_type == tokens.POD_VLLM.type:
        image = props.get("image")
        match = IMAGE.fullmatch(str(image)) if image is not None else None
        return [VllmCommand(f"pod {name}", list(props["command_line"]),
                            match["tag"] if match else None)]
    if resource_type == tokens.K8S_DEPLOYMENT.type:
        return [VllmCommand(f"container {c['name']}", argv, image_tag(c))
                for c, argv in vllm_containers(props)]
    return []


def for_vllm_commands(check: Callable[[VllmCommand, ReportViolation], None]) -> Check:
    """Makes `check(command, report)` a resource validation of every vLLM command line."""
    @functools.wraps(check)
    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        with unknown_is_violation(report):
            for command in vllm_commands(args.resource_type, args.props, args.name):
                check(command, report)
    return validate
