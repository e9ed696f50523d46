"""The generic checker: collects every problem in a stack's config, so all are reported at once.

Each method checks one value and returns its normal form, or None after recording a Problem
that names the full key, what was given and what is allowed. No Pulumi here: `config.load`
turns a ConfigError into the error Pulumi prints.
"""

from __future__ import annotations

import ipaddress
import os
import posixpath
import re
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
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
    """Collects problems; each method returns the checked value, or None after a problem."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []

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

    def obj(self, key: str, value: Any, allowed_keys: Sequence[str],
            required: bool = True) -> dict | None:
        """A mapping with only the allowed keys; {} when it may be left out.

        None after a problem with the object itself: its members are then not checked, since
        each would only repeat that problem.
        """
        what = "an object with keys " + ", ".join(allowed_keys)
        if value is MISSING and not required:
            return {}
        if not isinstance(value, Mapping):
            self.fail(key, value, what + (" (required)" if value is MISSING else ""))
            return None
        for unknown in sorted(set(value) - set(allowed_keys), key=str):
            self.report(f"{key}.{unknown}", "an unknown key", "one of " + ", ".join(allowed_keys))
        return dict(value)

    def named_map(self, key: str, value: Any, what: str, required: bool = True) -> dict | None:
        """A mapping from names (NAME) to objects, e.g. inferenceHosts: {reds: {...}}."""
        if value is MISSING and not required:
            return {}
        if not isinstance(value, Mapping) or (required and not value):
            self.fail(key, value, f"a non-empty map of name -> {what}"
                      + (" (required)" if value is MISSING else ""))
            return None
        for name in value:
            if not (isinstance(name, str) and NAME.fullmatch(name)):
                self.report(f"{key}.{name}", "an invalid name", NAME_TEXT)
        return {name: item for name, item in value.items()
                if isinstance(name, str) and NAME.fullmatch(name)}

    def integer(self, key: str, value: Any, lo: int, hi: int | None = None,
                default: int | None = None, note: str = "required") -> int | None:
        """An integer in range; `note` (shown when there is no default) says why it is required."""
        what = f"an integer {lo}-{hi}" if hi is not None else f"an integer >= {lo}"
        if default is None:
            what += f" ({note})"
        if value is MISSING:
            if default is None:
                self.fail(key, MISSING, what)
            return default
        number = from_text(value)
        if isinstance(number, bool) or not isinstance(number, int) \
                or number < lo or (hi is not None and number > hi):
            self.fail(key, value, what)
            return None
        return number

    def number(self, key: str, value: Any, lo: float, hi: float | None = None,
               default: float | None = None, lo_open: bool = False, note: str = "required") -> float | None:
        """A number (int or float) in range; lo_open: strictly above lo."""
        what = (f"a number {'>' if lo_open else '>='} {lo:g}"
                + (f" and <= {hi:g}" if hi is not None else ""))
        if value is MISSING:
            if default is None:
                self.fail(key, MISSING, f"{what} ({note})")
            return default
        number = from_text(value)
        if isinstance(number, bool) or not isinstance(number, (int, float)) or number != number \
                or (number <= lo if lo_open else number < lo) or (hi is not None and number > hi):
            self.fail(key, value, what)
            return None
        return float(number)

    def usd(self, key: str, value: Any, default: float | None = None) -> float | None:
        """An amount in USD greater than 0."""
        if value is MISSING and default is not None:
            return default
        amount = from_text(value)
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or not amount > 0:
            self.fail(key, value, "an amount in USD greater than 0" +
                      (" (required)" if value is MISSING else ""))
            return None
        return float(amount)

    def optional_integer(self, key: str, value: Any, lo: int) -> int | None:
        return None if value is MISSING else self.integer(key, value, lo, note="optional")

    def port(self, key: str, value: Any, default: int | None = None) -> int | None:
        return self.integer(key, value, 1, 65535, default=default)

    def text(self, key: str, value: Any, valid: Callable[[str], str | None], what: str,
             default: str | None = None) -> str | None:
        """A string that `valid` accepts (returning its normal form)."""
        if value is MISSING:
            if default is None:
                self.fail(key, MISSING, f"{what} (required)")
            return default
        normal = valid(value) if isinstance(value, str) else None
        if normal is None:
            self.fail(key, value, what)
        return normal

    def pattern(self, key: str, value: Any, regex: re.Pattern[str], what: str,
                default: str | None = None) -> str | None:
        return self.text(key, value, lambda v: v if regex.fullmatch(v) else None, what, default)

    def choice(self, key: str, value: Any, choices: Sequence[str],
               default: str | None = None) -> str | None:
        return self.text(key, value, lambda v: v if v in choices else None,
                         "one of " + ", ".join(choices), default)

    def boolean(self, key: str, value: Any, default: bool) -> bool:
        if value is MISSING:
            return default
        value = {"true": True, "false": False}.get(value, value) if isinstance(value, str) else value
        if not isinstance(value, bool):  # as the CLI writes them, too
            self.fail(key, value, "true or false")
            return default
        return value
