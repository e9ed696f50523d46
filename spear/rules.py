"""The seed rules' shared facts: one home for each constant and predicate that the config
checker, the components, the policy pack and the scripts all need (docs/RULES.md says which
rule lives where).

Pure Python with no dependencies, so the policy pack's own virtualenv can import it too.
"""

from __future__ import annotations

import ipaddress
import re

# Seed 001 "How to develop with it": a pin is content, never a name that moves. Git prints
# commit ids in lowercase, and the build compares the checked-out HEAD with the pin as text.
COMMIT = re.compile(r"[0-9a-f]{40}")
COMMIT_TEXT = ("a commit id of 40 lowercase hex characters (a branch or tag name is refused: it"
               " moves, and a build must not)")
SHA256 = re.compile(r"[0-9a-fA-F]{64}")
SHA256_TEXT = "64 hex characters (a sha256 digest)"

# Seed 001 "How to maintain it": the engine version is part of the pin, so an image names a
# version tag (never `latest`) or an @sha256 digest. [registry[:port]/]name[:tag][@sha256:digest]
IMAGE = re.compile(r"(?P<repository>(?:[a-z0-9.-]+(?::[0-9]+)?/)?[a-z0-9][a-z0-9._/-]*)"
                   r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?(?:@(?P<digest>sha256:[0-9a-f]{64}))?")
IMAGE_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
IMAGE_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
UNPINNED_TAG = "latest"

# Seed 000 §6.2.6: the server is a system unit in system.slice; tool sandboxes run in scopes
# under user.slice, so no limit or OOM kill in a tool call can reach the model server.
SYSTEM_UNIT_DIR = "/etc/systemd/system"
SYSTEM_SLICE = "system.slice"
INFERENCE_UNIT = "spear-inference.service"

# Seed 000 §6.2.11: the smoke test's expected answer.
SMOKE_ANSWER = "SPEAR-BACKEND-OK"


def is_commit(value: object) -> bool:
    return isinstance(value, str) and COMMIT.fullmatch(value) is not None


def is_sha256(value: object) -> bool:
    return isinstance(value, str) and SHA256.fullmatch(value) is not None


def image_pin_problem(image: object) -> str | None:
    """Why an image reference does not pin the engine; None when it does (a version tag, or a
    digest)."""
    match = IMAGE.fullmatch(image) if isinstance(image, str) else None
    if match is None:
        return f"{image!r} is not an image reference"
    if match["digest"]:
        return None
    if not match["tag"]:
        return f"{image!r} has no tag (it means :latest)"
    if match["tag"] == UNPINNED_TAG:
        return f"{image!r} is tagged :latest, which moves"
    return None


def is_loopback(host: object) -> bool:
    """True for an address only this machine can reach: 127.0.0.0/8, ::1, localhost.

    Seed 000 §6.2: llama-server listens on loopback only; and a host reached over SSH on a
    loopback address is this machine, whose ports the client side shares.
    """
    if not isinstance(host, str):
        return False
    host = host.strip("[]")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def cgroup_line(slice_name: str, unit: str) -> str:
    """The unified-hierarchy line of /proc/<pid>/cgroup for a process of `unit` in `slice_name`."""
    return f"0::/{slice_name}/{unit}"
