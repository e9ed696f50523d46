"""Each stack key declared once: an `Opt` is its kind (what a value must be), default and
one-line doc. From the declarations come the reading (`Kind.read`: the normal form, or a
Problem naming the key, what was given and what is allowed), the key lists, the JSON Schema of
the stack files (`stack_schema`) and the keys the prod stack must document (`paths`).

A section reads its object with `OBJ.read(check, key, value)`: a dict of checked values by
stack key, defaults filled in. What spans keys (one key allowed only with another, a name
that must be declared elsewhere) stays in the section's code, over the checked values.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from config.checker import (MISSING, NAME, NAME_TEXT, NAMESPACE, Checker, from_text,
                            relative_subdir, show)

INVALID: Any = object()  # what `Kind.normal` returns for a value it refuses


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()  # an Opt's default when the stack must set it


@dataclass(frozen=True)
class Opt:
    kind: Kind
    doc: str  # one line: what the key means to the person setting it
    default: Any = REQUIRED  # REQUIRED, None (optional, no default), or the value left out means
    why: str = "required"  # said when a required key is left out

    def read(self, check: Checker, key: str, value: Any) -> Any:
        if value is MISSING:
            if self.default is REQUIRED and isinstance(self.kind, Raw):
                return MISSING  # its section says what is missing, with what it depends on
            if self.default is REQUIRED:
                check.fail(key, MISSING, f"{self.kind.allowed} ({self.why})")
                return None
            # An object left out is read as empty, so its own defaults are filled in.
            return self.kind.read(check, key, {}) if isinstance(self.kind, Obj) \
                and self.default == {} else self.default
        return self.kind.read(check, key, value)

    def schema(self) -> dict:
        schema = {**self.kind.schema(), "description": self.doc}
        if self.default not in (REQUIRED, None, {}):
            schema["default"] = self.default
        return schema


class Kind:
    """What a value must be. `normal` gives its normal form or INVALID; `allowed` says it."""

    allowed = ""

    def normal(self, value: Any) -> Any:
        raise NotImplementedError

    def read(self, check: Checker, key: str, value: Any) -> Any:
        normal = self.normal(value)
        if normal is INVALID:
            check.fail(key, value, self.allowed)
            return None
        return normal

    def schema(self) -> dict:
        raise NotImplementedError

    def files(self, value: Any) -> Iterator[tuple[str, bool]]:
        """The files (path, is a folder) a value names, which config/load.py reads before the
        check: reading stays out of `parse`."""
        return iter(())


# `pulumi config set --path` writes every value as text: a number may come as "30".
_INTEGER_TEXT = {"type": "string", "pattern": "^-?[0-9]+$"}
_NUMBER_TEXT = {"type": "string", "pattern": r"^-?[0-9]+(\.[0-9]+)?$"}


@dataclass(frozen=True)
class Int(Kind):
    lo: int
    hi: int | None = None

    @property
    def allowed(self) -> str:
        return f"an integer {self.lo}-{self.hi}" if self.hi is not None \
            else f"an integer >= {self.lo}"

    def normal(self, value: Any) -> Any:
        number = from_text(value)
        if isinstance(number, bool) or not isinstance(number, int) or number < self.lo \
                or (self.hi is not None and number > self.hi):
            return INVALID
        return number

    def schema(self) -> dict:
        number = {"type": "integer", "minimum": self.lo}
        if self.hi is not None:
            number["maximum"] = self.hi
        return {"anyOf": [number, _INTEGER_TEXT]}


PORT = Int(1, 65535)


@dataclass(frozen=True)
class Number(Kind):
    lo: float
    hi: float | None = None
    lo_open: bool = False  # strictly above lo
    text: str | None = None  # what to call it instead of its range

    @property
    def allowed(self) -> str:
        return self.text or (f"a number {'>' if self.lo_open else '>='} {self.lo:g}"
                             + (f" and <= {self.hi:g}" if self.hi is not None else ""))

    def normal(self, value: Any) -> Any:
        number = from_text(value)
        if isinstance(number, bool) or not isinstance(number, (int, float)) or number != number \
                or (number <= self.lo if self.lo_open else number < self.lo) \
                or (self.hi is not None and number > self.hi):
            return INVALID
        return float(number)

    def schema(self) -> dict:
        number: dict = {"type": "number",
                        "exclusiveMinimum" if self.lo_open else "minimum": self.lo}
        if self.hi is not None:
            number["maximum"] = self.hi
        return {"anyOf": [number, _NUMBER_TEXT]}


USD = Number(0, lo_open=True, text="an amount in USD greater than 0")


class Bool(Kind):
    allowed = "true or false"

    def normal(self, value: Any) -> Any:
        # As the CLI writes them, too.
        value = {"true": True, "false": False}.get(value, value) if isinstance(value, str) else value
        return value if isinstance(value, bool) else INVALID

    def schema(self) -> dict:
        return {"enum": [True, False, "true", "false"]}


BOOL = Bool()


@dataclass(frozen=True)
class Choice(Kind):
    choices: tuple[str, ...]

    @property
    def allowed(self) -> str:
        return "one of " + ", ".join(self.choices)

    def normal(self, value: Any) -> Any:
        return value if isinstance(value, str) and value in self.choices else INVALID

    def schema(self) -> dict:
        return {"enum": list(self.choices)}


@dataclass(frozen=True)
class Text(Kind):
    """A string that `valid` accepts, returning its normal form (or None)."""
    valid: Callable[[str], str | None]
    allowed: str
    pattern: str | None = None  # the JSON Schema's approximation, for editors

    def normal(self, value: Any) -> Any:
        normal = self.valid(value) if isinstance(value, str) else None
        return INVALID if normal is None else normal

    def schema(self) -> dict:
        return {"type": "string", **({"pattern": self.pattern} if self.pattern else {})}


def pattern(regex: re.Pattern[str], allowed: str) -> Text:
    """A string the whole of which `regex` matches."""
    return Text(lambda v: v if regex.fullmatch(v) else None, allowed, f"^(?:{regex.pattern})$")


NAME_KIND = pattern(NAME, NAME_TEXT)


@dataclass(frozen=True)
class ListOf(Kind):
    item: Kind
    what: str  # the allowed text of the whole list
    non_empty: bool = False

    @property
    def allowed(self) -> str:
        return self.what

    def read(self, check: Checker, key: str, value: Any) -> Any:
        if not isinstance(value, list) or (self.non_empty and not value):
            check.fail(key, value, self.what)
            return None
        return tuple(self.item.read(check, f"{key}[{i}]", item) for i, item in enumerate(value))

    def schema(self) -> dict:
        return {"type": "array", "items": self.item.schema(),
                **({"minItems": 1} if self.non_empty else {})}

    def files(self, value: Any) -> Iterator[tuple[str, bool]]:
        for item in value if isinstance(value, list) else ():
            yield from self.item.files(item)


@dataclass(frozen=True)
class Labels(Kind):
    """A map of names to one-line strings (labels, a key's metadata)."""
    allowed: str = "a map of names to one-line strings"
    line: re.Pattern[str] = re.compile(r"[ -~]{0,256}")
    name: re.Pattern[str] = re.compile(r".*", re.S)

    def normal(self, value: Any) -> Any:
        if not isinstance(value, Mapping) or not all(
                isinstance(k, str) and self.name.fullmatch(k) and isinstance(v, str)
                and self.line.fullmatch(v) for k, v in value.items()):
            return INVALID
        return dict(value)

    def read(self, check: Checker, key: str, value: Any) -> Any:
        normal = self.normal(value)
        if normal is INVALID:
            check.report(key, show(value), self.allowed)
            return None
        return normal

    def schema(self) -> dict:
        return {"type": "object", "additionalProperties": {"type": "string"}}


@dataclass(frozen=True)
class Raw(Kind):
    """A value its section checks itself (it depends on other keys); declared here for its doc
    and its schema."""
    json: Mapping[str, Any]
    allowed: str = ""

    def normal(self, value: Any) -> Any:
        return value

    def schema(self) -> dict:
        return dict(self.json)


@dataclass(frozen=True)
class Later(Kind):
    """A value its section reads itself, entry by entry (Named.entries), with what it declares."""
    kind: Kind

    @property
    def allowed(self) -> str:
        return self.kind.allowed

    def normal(self, value: Any) -> Any:
        return value

    def schema(self) -> dict:
        return self.kind.schema()

    def files(self, value: Any) -> Iterator[tuple[str, bool]]:
        return self.kind.files(value)


@dataclass(frozen=True)
class AnyOf(Kind):
    """One of several shapes, which one decided by the rest of the stack (its section reads it
    with the right one, through Later)."""
    choices: tuple[Kind, ...]

    def schema(self) -> dict:
        return {"anyOf": [kind.schema() for kind in self.choices]}

    def files(self, value: Any) -> Iterator[tuple[str, bool]]:
        for kind in self.choices:
            yield from kind.files(value)


class Secret(Raw):
    """A Pulumi secret (`pulumi config set --secret`): the stack file holds its ciphertext."""

    def __init__(self) -> None:
        super().__init__({"type": "object", "properties": {"secure": {"type": "string"}},
                          "required": ["secure"], "additionalProperties": False})


SECRET = Secret()


@dataclass(frozen=True)
class Obj(Kind):
    """An object of declared keys; `read` gives {key: checked value} (None for a key at fault),
    or None when the value is no object (its keys would only repeat that)."""
    fields: Mapping[str, Opt]

    @property
    def allowed(self) -> str:
        return "an object with keys " + ", ".join(self.fields)

    def read(self, check: Checker, key: str, value: Any) -> dict | None:
        if not isinstance(value, Mapping):
            check.fail(key, value, self.allowed + (" (required)" if value is MISSING else ""))
            return None
        for unknown in sorted(set(value) - set(self.fields), key=str):
            check.report(f"{key}.{unknown}", "an unknown key", "one of " + ", ".join(self.fields))
        return {name: opt.read(check, f"{key}.{name}", value.get(name, MISSING))
                for name, opt in self.fields.items()}

    def schema(self) -> dict:
        required = [name for name, opt in self.fields.items() if opt.default is REQUIRED]
        return {"type": "object", "additionalProperties": False,
                "properties": {name: opt.schema() for name, opt in self.fields.items()},
                **({"required": required} if required else {})}

    def files(self, value: Any) -> Iterator[tuple[str, bool]]:
        for name, opt in self.fields.items():
            if isinstance(value, Mapping) and name in value:
                yield from opt.kind.files(value[name])


@dataclass(frozen=True)
class Named(Kind):
    """A map from names (NAME) to objects, e.g. inferenceHosts: {reds: {...}}."""
    item: Kind
    what: str  # what one entry is, e.g. "an inference host"
    non_empty: bool = True
    name: re.Pattern[str] = NAME
    name_text: str = NAME_TEXT
    map_text: str = ""  # what the whole map is, when not "a non-empty map of name -> <what>"

    @property
    def allowed(self) -> str:
        return self.map_text or f"a non-empty map of name -> {self.what}"

    def read(self, check: Checker, key: str, value: Any) -> dict | None:
        """{name: checked entry} for the valid names (None for an entry at fault)."""
        entries = self.entries(check, key, value)
        return entries and {name: self.item.read(check, f"{key}.{name}", item)
                            for name, item in entries.items()}

    def entries(self, check: Checker, key: str, value: Any) -> dict | None:
        """{name: entry as given} for the valid names, for a section that reads each entry
        itself (and builds it only when it had no problem)."""
        if not isinstance(value, Mapping) or (self.non_empty and not value):
            check.fail(key, value, self.allowed + (" (required)" if value is MISSING else ""))
            return None
        for name in value:
            if not (isinstance(name, str) and self.name.fullmatch(name)):
                check.report(f"{key}.{name}", "an invalid name", self.name_text)
        return {name: item for name, item in value.items()
                if isinstance(name, str) and self.name.fullmatch(name)}

    def schema(self) -> dict:
        return {"type": "object", "propertyNames": {"pattern": f"^(?:{self.name.pattern})$"},
                "additionalProperties": self.item.schema(),
                **({"minProperties": 1} if self.non_empty else {})}

    def files(self, value: Any) -> Iterator[tuple[str, bool]]:
        for item in value.values() if isinstance(value, Mapping) else ():
            yield from self.item.files(item)


@dataclass(frozen=True)
class Either(Kind):
    """One of several objects, told apart by which of their first keys the value has."""
    choices: Mapping[str, Obj]  # the key that marks it -> the object
    allowed: str

    def read(self, check: Checker, key: str, value: Any) -> tuple[str, dict | None] | None:
        """(the marking key, the object read), or None when no one alternative is marked."""
        marks = [mark for mark in self.choices if isinstance(value, Mapping) and mark in value]
        if len(marks) != 1:
            check.fail(key, value, self.allowed + (" (required)" if value is MISSING else ""))
            return None
        return marks[0], self.choices[marks[0]].read(check, key, value)

    def schema(self) -> dict:
        return {"oneOf": [obj.schema() for obj in self.choices.values()]}

    def files(self, value: Any) -> Iterator[tuple[str, bool]]:
        for obj in self.choices.values():
            yield from obj.files(value)


@dataclass(frozen=True)
class Tagged(Kind):
    """One of several objects, told apart by the value of their key `tag`."""
    tag: str
    choices: Mapping[str, Obj]  # the tag's value -> the object (which declares the tag too)

    @property
    def allowed(self) -> str:
        return "an object with keys " + ", ".join(dict.fromkeys(
            name for obj in self.choices.values() for name in obj.fields))

    def read(self, check: Checker, key: str, value: Any) -> tuple[str, dict | None] | None:
        if not isinstance(value, Mapping):
            check.fail(key, value, self.allowed)
            return None
        tag = self.choices[next(iter(self.choices))].fields[self.tag].read(
            check, f"{key}.{self.tag}", value.get(self.tag, MISSING))
        return None if tag is None else (tag, self.choices[tag].read(check, key, value))

    def schema(self) -> dict:
        return {"oneOf": [{**obj.schema(), "properties": {
            **obj.schema()["properties"], self.tag: {"const": tag}}}
            for tag, obj in self.choices.items()]}

    def files(self, value: Any) -> Iterator[tuple[str, bool]]:
        for obj in self.choices.values():
            yield from obj.files(value)


@dataclass(frozen=True)
class Moved(Kind):
    """A key that moved: refused, saying where it lives now."""
    to: str  # where it went and why

    def read(self, check: Checker, key: str, value: Any) -> None:
        check.report(key, "a setting that moved", f"nothing: {self.to}")

    def schema(self) -> dict:
        return {"not": {}, "description": f"moved: {self.to}"}


@dataclass(frozen=True)
class ProjectFile(Kind):
    """A file inside the project, by its path there; read gives its bytes (config/load.py read
    it)."""
    what: str
    folder: bool = False  # a folder: read gives {file name: bytes} of the files in it

    @property
    def allowed(self) -> str:
        return f"{self.what}: a path inside the project"

    def normal(self, value: Any) -> Any:
        path = relative_subdir(value) if isinstance(value, str) else None
        return INVALID if path is None else path

    def read(self, check: Checker, key: str, value: Any) -> Any:
        path = super().read(check, key, value)
        if path is None or self.folder:
            return path and {name.removeprefix(path + "/"): data
                             for name, data in check.files.items()
                             if name.startswith(path + "/") and isinstance(data, bytes)}
        data = check.files.get(path, "not read")
        if not isinstance(data, bytes):
            check.fail(key, value, f"{self.what}: a readable file ({data})")
            return None
        return data

    def schema(self) -> dict:
        return {"type": "string"}

    def files(self, value: Any) -> Iterator[tuple[str, bool]]:
        if self.normal(value) is not INVALID:
            yield self.normal(value), self.folder


# --------------------------------------------------------------------------------------------
# What the declarations give beyond reading


NAME_SEGMENT = "<name>"  # a path segment that is a name the stack chooses


def paths(kind: Kind, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every key path a kind declares, a name the stack chooses as NAME_SEGMENT (a list's items
    add no segment)."""
    if isinstance(kind, Obj):
        for name, opt in kind.fields.items():
            if not isinstance(opt.kind, Moved):
                yield (*prefix, name)
                yield from paths(opt.kind, (*prefix, name))
    elif isinstance(kind, (Either, Tagged)):
        for obj in kind.choices.values():
            yield from paths(obj, prefix)
    elif isinstance(kind, Named):
        yield (*prefix, NAME_SEGMENT)
        yield from paths(kind.item, (*prefix, NAME_SEGMENT))
    elif isinstance(kind, ListOf):
        yield from paths(kind.item, prefix)
    elif isinstance(kind, Later):
        yield from paths(kind.kind, prefix)
    elif isinstance(kind, AnyOf):
        for choice in kind.choices:
            yield from paths(choice, prefix)


def is_object(kind: Kind) -> bool:
    """Whether the value is an object (Pulumi's config holds it as JSON)."""
    return not isinstance(kind, Secret) and (isinstance(kind, (Either, Tagged))
                                             or kind.schema().get("type") == "object")


def stack_schema(namespace: Obj) -> dict:
    """The JSON Schema of a stack file (Pulumi.<stack>.yaml): the namespace's keys as declared,
    any other namespace's as they are."""
    keys = {f"{NAMESPACE}:{name}": opt.schema() for name, opt in namespace.fields.items()}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"A {NAMESPACE} stack file (generated from config/schema by scripts/stack-schema)",
        "type": "object",
        "properties": {
            "config": {"type": "object", "properties": keys,
                       # A key of our namespace that is not declared is a typo.
                       "propertyNames": {"anyOf": [{"enum": sorted(keys)},
                                                   {"not": {"pattern": f"^{NAMESPACE}:"}}]}},
            "secretsprovider": {"type": "string"},
            "encryptedkey": {"type": "string"},
            "encryptionsalt": {"type": "string"},
        },
    }
