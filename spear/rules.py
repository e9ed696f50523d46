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
