"""The repository's stack files as the program sees them, for tests without an engine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

import stack_config

REPO = Path(__file__).resolve().parent.parent
DUMMY_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n"


def stack_raw(stack: str) -> dict[str, Any]:
    """A stack file's config, as the namespace parse() takes (prefix stripped)."""
    config = yaml.safe_load((REPO / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"]
    prefix = stack_config.NAMESPACE + ":"
    assert all(key.startswith(prefix) for key in config)
    return {key[len(prefix):]: value for key, value in config.items()}


def prod_raw() -> dict[str, Any]:
    """prod plus the secret key the lead adds encrypted."""
    return {**stack_raw("prod"), "sshPrivateKey": DUMMY_KEY}


def engine_config(raw: dict[str, Any]) -> dict[str, str]:
    """What the engine hands the program: full keys, objects as JSON text."""
    return {f"spear-fleet:{key}": value if isinstance(value, str) else json.dumps(value)
            for key, value in raw.items()}
