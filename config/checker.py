"""The checker: collects every problem in a stack's config, so all are reported at once, each a
Problem naming the full key, what was given and what is allowed; and the value forms several
sections share. No Pulumi here: `config.load` turns a ConfigError into the error Pulumi prints.
"""

from __future__ import annotations

import ipaddress
import os
import posixpath
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spear.rules import is_loopback

NAMESPACE = "spear-fleet"


@dataclass(frozen=True)
class Problem:
    key: str  # full key path, e.g. "spear-fleet:inferenceHosts.reds.server.ctxSize"
    given: str  # what the stack said, as shown to the user
    allowed: str

    def __str__(self) -> str:
        return f"{self.key}: got {self.given}; allowed: {self.allowed}"


class ConfigError(Exception):
    """Every problem found in the stack config, one per line."""

    def __init__(self, *problems: Problem) -> None:
        self.problems = problems
        super().__init__("invalid stack config:\n" + "\n".join(str(p) for p in problems))


class _Missing:
    def __repr__(self) -> str:
        return "nothing"


MISSING: Any = _Missing()  # a key the stack does not set (None is a value YAML can give)

# Names and paths end up in shell-sourced files, systemd units and remote shell commands:
# keep them to characters that need no quoting anywhere.
FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
FILE_NAME_TEXT = "a file name (letters, digits, '.', '_', '+', '-'; no '/')"
SAFE_PATH = re.compile(r"[A-Za-z0-9._+/-]+")
# A DNS-1123 label: what Kubernetes allows as a namespace name.
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
DNS_LABEL_TEXT = "a DNS-1123 label (lowercase letters, digits, '-'; at most 63)"
HOSTNAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*")
USER = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
# A name that becomes part of resource names, unit names and paths.
NAME = re.compile(r"[a-z][a-z0-9-]{0,30}")
NAME_TEXT = "a name of lowercase letters, digits and '-', starting with a letter (at most 31)"
LOCATION_TEXT = "an absolute local path (or ~/...) or an http(s) URL"


_INTEGER_TEXT = re.compile(r"-?[0-9]+")
_DECIMAL_TEXT = re.compile(r"-?[0-9]+\.[0-9]+")


def from_text(value: Any) -> Any:
    """A number written as text, as `pulumi config set --path` writes every value (with or
    without --type), where the text is exactly an integer or a decimal ("12.5", "30"); any
    other value as it is."""
    if isinstance(value, str) and _INTEGER_TEXT.fullmatch(value):
        return int(value)
    if isinstance(value, str) and _DECIMAL_TEXT.fullmatch(value):
        return float(value)
    return value


def get(mapping: Mapping[str, Any], key: str) -> Any:
    return mapping.get(key, MISSING)


def map_names(value: Any) -> list[str]:
    """The names a map declares, before any check (for checks that refer to them by name)."""
    return [name for name in value if isinstance(name, str)] if isinstance(value, Mapping) else []


def show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def expand_location(value: str) -> str | None:
    """An http(s) URL as is, a local path with `~` expanded; None when it is neither."""
    url = urllib.parse.urlparse(value)
    if url.scheme in ("http", "https"):
        return value if url.netloc and not any(c.isspace() for c in value) else None
    path = os.path.expanduser(value)
    return path if os.path.isabs(path) and "\n" not in path else None


def relative_subdir(value: str) -> str | None:
    path = posixpath.normpath(value)
    if SAFE_PATH.fullmatch(value) and not path.startswith("/") and ".." not in path.split("/"):
        return path
    return None


def absolute_dir(value: str) -> str | None:
    path = posixpath.normpath(value)
    return path if SAFE_PATH.fullmatch(value) and path.startswith("/") and path != "/" else None


API_URL_TEXT = "an https URL (http only on a loopback address: a test stand-in)"


def api_url(value: str) -> str | None:
    """An API's base URL without a trailing slash; None unless https, or http on loopback (a
    key travels in its headers: in clear only to this machine)."""
    url = urllib.parse.urlparse(value)
    if not url.hostname or url.query or url.fragment or any(c.isspace() for c in value):
        return None
    if url.scheme == "https" or (url.scheme == "http" and is_loopback(url.hostname)):
        return value.rstrip("/")
    return None


def ip_address(value: str) -> str | None:
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        return None


class Checker:
    """Collects problems (config/options.py's kinds report theirs here)."""

    def __init__(self, files: Mapping[str, bytes | str] | None = None) -> None:
        self.problems: list[Problem] = []
        # What the stack's files hold, read before the check (config/load.py::read_files):
        # path -> its bytes, or why it could not be read.
        self.files = files or {}

    def fail(self, key: str, given: Any, allowed: str) -> None:
        self.report(key, show(given), allowed)

    def report(self, key: str, described: str, allowed: str) -> None:
        """Like fail, for a value that is described rather than shown (secrets, unknown keys)."""
        self.problems.append(Problem(f"{NAMESPACE}:{key}", described, allowed))

    def mark(self) -> int:
        return len(self.problems)

    def clean_since(self, mark: int) -> bool:
        """True when no problem was found since `mark` (a `mark()` taken earlier)."""
        return len(self.problems) == mark

    def raise_if_any(self) -> None:
        if self.problems:
            raise ConfigError(*self.problems)
