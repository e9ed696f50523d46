"""config, the agent seats (`vllmFleet.agentSandbox.seatImage`, `.seats` and
`.dialectCheckDeveloper`): a seat is a declared developer's with a known harness, in a stack with
a gateway, on a seat image pinned by digest, with a declared developer's key for the dialect checks;
every bad value is refused with the full key, what was given and what is allowed, all at once and
before any resource is registered."""

from __future__ import annotations

import pytest

from config.checker import ConfigError
from config.load import parse_stack
from config.types import Seat
from spear.harness import CODEX as CODEX_HARNESS, DEFAULT_VERSIONS, seat_image_tag
from tests.support.config_cases import (DELETE, SEAT_IMAGE, SEAT_SECRETS, SEATS, allowed_for,
                                        changed, fleet_raw, repeated_cases, seats_raw)

SANDBOX = SEATS[:-1]
CODEX = {"developer": "ana", "harness": "codex"}


def _seat(**item) -> dict:
    return seats_raw(**{"ana-codex": {**CODEX, **item}})


# (id, config, full key without the namespace, a fragment of what is allowed)
BAD = [
    ("image-missing", changed(seats_raw(), (*SANDBOX, "seatImage"), DELETE),
     "vllmFleet.agentSandbox.seatImage", "an image pinned by digest, repository[:tag]@sha256:<64"
     " lowercase hex> (required with seats"),
    ("image-by-tag", changed(seats_raw(), (*SANDBOX, "seatImage"), "registry.example.com/spear/seat:2026.07"),
     "vllmFleet.agentSandbox.seatImage", "'registry.example.com/spear/seat:2026.07' has no @sha256"
     " digest (a tag can be pushed again)"),
    ("image-short-digest", changed(seats_raw(), (*SANDBOX, "seatImage"), "seat@sha256:abc"),
     "vllmFleet.agentSandbox.seatImage", "is not an image reference"),
    ("image-built-for-other-harnesses", changed(seats_raw(), (*SANDBOX, "seatImage"),
                                                "localhost/spear-fleet/seat:h-0123456789ab@sha256:"
                                                + "3c" * 32),
     "vllmFleet.agentSandbox.seatImage", "the seat image built for the versions `harnesses` pins"),
    ("developer-undeclared", _seat(developer="zed"),
     "vllmFleet.agentSandbox.seats.ana-codex.developer", "a developer declared under `developers`"
     " (ana, bob): the seat holds that developer's virtual key"),
    ("developer-missing", seats_raw(**{"ana-codex": {"harness": "codex"}}),
     "vllmFleet.agentSandbox.seats.ana-codex.developer", "(required)"),
    ("harness-unknown", _seat(harness="aider"),
     "vllmFleet.agentSandbox.seats.ana-codex.harness", "one of qwen-code, openhands, claude-code, codex"),
    ("harness-missing", seats_raw(**{"ana-codex": {"developer": "ana"}}),
     "vllmFleet.agentSandbox.seats.ana-codex.harness", "one of qwen-code, openhands, claude-code,"
     " codex (required)"),
    ("workspace-size-not-a-quantity", _seat(workspaceSize="10GB"),
     "vllmFleet.agentSandbox.seats.ana-codex.workspaceSize", "a Kubernetes quantity, e.g. 10Gi"),
    ("seat-unknown-key", _seat(image="other"),
     "vllmFleet.agentSandbox.seats.ana-codex.image", "one of developer, harness, workspaceSize"),
    ("seat-not-an-object", seats_raw(**{"ana-codex": "codex"}),
     "vllmFleet.agentSandbox.seats.ana-codex", "an object with keys developer, harness, workspaceSize"),
    ("seat-name-ends-with-a-dash", seats_raw(**{"ana-": CODEX}),
     "vllmFleet.agentSandbox.seats.ana-", "a seat name of lowercase letters, digits and inner '-'"),
    ("seat-name-uppercase", seats_raw(**{"Ana": CODEX}),
     "vllmFleet.agentSandbox.seats.Ana", "a seat name of lowercase letters"),
    ("seat-name-too-long", seats_raw(**{"a" * 32: CODEX}),
     "vllmFleet.agentSandbox.seats." + "a" * 32, "(at most 31; it names the seat's Kubernetes objects)"),
    ("seats-not-a-map", changed(seats_raw(), SEATS, ["ana-codex"]),
     "vllmFleet.agentSandbox.seats", "a map of seat name -> {developer, harness, workspaceSize}"),
    ("seat-name-of-a-dialect-check", seats_raw(**{"dialect-codex": CODEX}),
     "vllmFleet.agentSandbox.seats.dialect-codex", "a seat name not starting with 'dialect-' (the"
     " harnesses' dialect checks are named so)"),
    ("dialect-check-developer-missing", changed(seats_raw(), (*SANDBOX, "dialectCheckDeveloper"), DELETE),
     "vllmFleet.agentSandbox.dialectCheckDeveloper", "a developer declared under `developers`"
     " (ana, bob) whose key runs each seated harness's dialect check, e.g. the CI's; seats need"
     " one (required)"),
    ("dialect-check-developer-undeclared", changed(seats_raw(), (*SANDBOX, "dialectCheckDeveloper"), "ci"),
     "vllmFleet.agentSandbox.dialectCheckDeveloper", "a developer declared under `developers`"
     " (ana, bob) whose key runs each seated harness's dialect check"),
    ("node-guard-missing", changed(seats_raw(), (*SANDBOX, "nodeGuard"), DELETE),
     "vllmFleet.agentSandbox.nodeGuard", "the node guard, required with seats"),
    ("node-guard-image-by-tag", changed(seats_raw(), (*SANDBOX, "nodeGuard", "image"),
                                        "registry.example.com/spear/node-guard:1.0.6"),
     "vllmFleet.agentSandbox.nodeGuard.image", "has no @sha256"),
    ("node-guard-api-server-plain-http", changed(seats_raw(), (*SANDBOX, "nodeGuard", "apiServer"),
                                                 "http://10.0.0.1:6443"),
     "vllmFleet.agentSandbox.nodeGuard.apiServer", "the API server's https URL"),
    ("node-guard-unknown-key", changed(seats_raw(), (*SANDBOX, "nodeGuard", "mode"), "strict"),
     "vllmFleet.agentSandbox.nodeGuard.mode", "image, apiServer"),
    ("runtime-class-not-a-name", changed(seats_raw(), (*SANDBOX, "runtimeClass"), "gVisor Sandbox"),
     "vllmFleet.agentSandbox.runtimeClass", "a RuntimeClass name (a DNS subdomain, e.g. gvisor)"),
    ("seats-without-a-gateway", fleet_raw(agentSandbox={
        "gateway": {"cidr": "10.20.0.10/32", "ports": [4000]}, "seatImage": SEAT_IMAGE,
        "dialectCheckDeveloper": "ana", "seats": {"ana-codex": CODEX}}),
     "vllmFleet.agentSandbox.seats", "seats only with `gateway` (each seat's harness reaches coder"
     " through it with its developer's virtual key)"),
]


@pytest.mark.parametrize("raw,key,allowed", [case[1:] for case in BAD], ids=[case[0] for case in BAD])
def test_a_bad_seat_value_is_refused_naming_key_and_allowed(mocks, raw, key, allowed):
    assert allowed in allowed_for(mocks, raw, key, SEAT_SECRETS)


def test_no_two_bad_seat_cases_share_an_id_or_a_refusal():
    assert repeated_cases(BAD) == []


def test_a_seat_parses_to_its_typed_config_with_the_default_workspace():
    sandbox = parse_stack(seats_raw(**{"ana-codex": CODEX, "bob-qwen": {
        "developer": "bob", "harness": "qwen-code", "workspaceSize": "20Gi"}})).vllm_fleet.agent_sandbox
    assert sandbox.seat_image == SEAT_IMAGE
    assert sandbox.seats == {
        "ana-codex": Seat(name="ana-codex", developer="ana", harness="codex", workspace_size="10Gi"),
        "bob-qwen": Seat(name="bob-qwen", developer="bob", harness="qwen-code", workspace_size="20Gi")}


def recipe_image(versions) -> str:
    """A seat image as localhosts/images/seat_image.py names the one it builds for `versions`."""
    return f"localhost/spear-fleet/seat:{seat_image_tag(versions)}@sha256:" + "3c" * 32


def test_a_harness_bump_past_the_seat_images_versions_is_refused_naming_both_tags():
    raw = changed(seats_raw(), (*SANDBOX, "seatImage"), recipe_image(DEFAULT_VERSIONS))
    assert parse_stack(raw).vllm_fleet.agent_sandbox.seat_image == recipe_image(DEFAULT_VERSIONS)
    bumped = {**DEFAULT_VERSIONS, CODEX_HARNESS: "0.170.0"}
    raw["harnesses"] = {CODEX_HARNESS: "0.170.0"}
    with pytest.raises(ConfigError) as error:
        parse_stack(raw)
    assert [p.key for p in error.value.problems] == ["spear-fleet:vllmFleet.agentSandbox.seatImage"]
    assert (f"its tag {seat_image_tag(DEFAULT_VERSIONS)} names other harness versions than these,"
            f" whose image is tagged {seat_image_tag(bumped)}") in str(error.value)
    # The image built for the bump passes; one not named by the recipe is left to the dialect
    # check at `up`, which asks the harness itself.
    raw["vllmFleet"]["agentSandbox"]["seatImage"] = recipe_image(bumped)
    assert parse_stack(raw).harnesses[CODEX_HARNESS] == "0.170.0"
    raw["vllmFleet"]["agentSandbox"]["seatImage"] = SEAT_IMAGE
    assert parse_stack(raw).harnesses[CODEX_HARNESS] == "0.170.0"


def test_the_seat_image_tag_names_every_harness_version():
    tags = {seat_image_tag({**DEFAULT_VERSIONS, harness: "9.9.9"}) for harness in DEFAULT_VERSIONS}
    assert len(tags | {seat_image_tag(DEFAULT_VERSIONS)}) == len(DEFAULT_VERSIONS) + 1


def test_a_sandbox_without_seats_has_none_and_needs_no_image():
    sandbox = parse_stack(fleet_raw()).vllm_fleet.agent_sandbox
    assert (sandbox.seat_image, sandbox.seats, sandbox.dialect_check_developer) == (None, {}, None)


def test_every_seat_problem_is_reported_at_once_one_per_line():
    raw = changed(seats_raw(**{"ana-codex": {"developer": "zed", "harness": "aider"},
                               "Bob": CODEX, "cyn": {"developer": "ana", "harness": "codex",
                                                     "workspaceSize": "lots"}}),
                  (*SANDBOX, "seatImage"), "registry.example.com/spear/seat:latest")
    raw = changed(raw, (*SANDBOX, "dialectCheckDeveloper"), "zed")
    with pytest.raises(ConfigError) as error:
        parse_stack(raw)
    assert [problem.key for problem in error.value.problems] == [
        # Each value as declared, then what refers to the rest of the stack.
        "spear-fleet:vllmFleet.agentSandbox.seatImage",
        "spear-fleet:vllmFleet.agentSandbox.seats.Bob",
        "spear-fleet:vllmFleet.agentSandbox.seats.ana-codex.harness",
        "spear-fleet:vllmFleet.agentSandbox.seats.cyn.workspaceSize",
        "spear-fleet:vllmFleet.agentSandbox.seats.ana-codex.developer",
        "spear-fleet:vllmFleet.agentSandbox.dialectCheckDeveloper"]


def test_the_prod_example_runs_its_agent_namespace_on_gvisor():
    from tests.support.stack_files import prod_raw
    assert parse_stack(prod_raw()).vllm_fleet.agent_sandbox.runtime_class == "gvisor"
