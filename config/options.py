"""Each stack key declared once: an `Opt` is its kind (what a value must be), default and
one-line doc, most of them on the field of the typed value that holds the key (`opt`, in
config/types.py). From the declarations come the reading (`Kind.read`: the normal form, or a
Problem naming the key, what was given and what is allowed), the typed values (`Typed`,
`build`), the key lists, the JSON Schema of the stack files (`stack_schema`) and the keys the
prod stack must document (`paths`).

A section reads its object with `declared(cls, ...).read(check, key, value)`: a dict of checked
values by stack key, defaults filled in, which `build` turns into `cls`. What spans keys (one key
allowed only with another, a name that must be declared elsewhere) stays in the section's code.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from config.checker import (HOSTNAME, LOCATION_TEXT, MISSING, NAME, NAME_TEXT, NAMESPACE, USER,
                            Checker, absolute_dir, expand_location, from_text, relative_subdir,
                            show)
from spear.rules import (COMMIT_TEXT, HOST_KEY_TEXT, SHA256_TEXT, host_key_normal, is_commit,
                         is_sha256)

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
                and self.default == {} else copy.deepcopy(self.default)
        return self.kind.read(check, key, value)

    def schema(self) -> dict:
        schema = {**self.kind.schema(), "description": self.doc}
        if self.default not in (REQUIRED, None, {}):
            schema["default"] = self.default
        return schema


T = TypeVar("T")
_OPT, _KEY = "spear-fleet option", "spear-fleet key"


def opt(kind: Kind, doc: str, default: Any = REQUIRED, why: str = "required",
        key: str | None = None) -> Any:
    """A typed value's field declared as a stack key (`key`, or the field's name in camelCase):
    the dataclass is the declaration, `declared` reads it and `build` fills it."""
    option = Opt(kind, doc, default, why)
    if default is REQUIRED:
        return dataclasses.field(metadata={_OPT: option, _KEY: key})
    if isinstance(default, (dict, list)):
        return dataclasses.field(default_factory=lambda: copy.deepcopy(default),
                                 metadata={_OPT: option, _KEY: key})
    return dataclasses.field(default=default, metadata={_OPT: option, _KEY: key})


def stack_key(key: str) -> Any:
    """A typed value's field that its section derives from the stack key `key`, which the section
    declares (`declared(..., key=Opt(...))` puts it at this field's place)."""
    return dataclasses.field(metadata={_KEY: key})


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _keyed(cls: type) -> list[tuple[str, str, Opt]]:
    """(field name, stack key, declaration) of each declared field of `cls`."""
    return [(f.name, f.metadata[_KEY] or _camel(f.name), f.metadata[_OPT])
            for f in dataclasses.fields(cls) if _OPT in f.metadata]


def declared(cls: type, **also: Opt) -> Obj:
    """The stack object `cls` declares, its fields' keys in their order; `also`: keys its section
    declares beside them (a reference or a login, typed as something else), each at its field's
    place when it has one."""
    fields = {}
    for f in dataclasses.fields(cls):
        key = f.metadata.get(_KEY) or _camel(f.name)
        if key in also or _OPT in f.metadata:
            fields[key] = also.get(key) or f.metadata[_OPT]
    order = list(fields)
    # A key with no field of its own goes right after the one `also` names before it.
    for before, key in zip([None, *also], also):
        if key not in fields:
            order.insert(order.index(before) + 1 if before in order else len(order), key)
    return Obj({key: fields.get(key) or also[key] for key in order})


def build(cls: type[T], values: Mapping[str, Any], **derived: Any) -> T:
    """`cls` from what `declared(cls)` read (a key it was not given keeps its field's default),
    and the fields its section derives."""
    return cls(**{name: values[key] for name, key, _ in _keyed(cls)
                  if key in values and name not in derived}, **derived)


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
class OrNone(Kind):
    """`kind`, or the word `none` (None)."""
    kind: Kind
    word: str = "none"

    @property
    def allowed(self) -> str:
        return self.kind.allowed

    def read(self, check: Checker, key: str, value: Any) -> Any:
        return None if value in (self.word, None) else self.kind.read(check, key, value)

    def schema(self) -> dict:
        return {"anyOf": [self.kind.schema(), {"const": self.word}]}


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


class Through(Kind):
    """A kind read through another (`inner`): allowed, documented and walked as that one is."""

    @property
    def inner(self) -> Kind:
        raise NotImplementedError

    @property
    def allowed(self) -> str:
        return self.inner.allowed

    def schema(self) -> dict:
        return self.inner.schema()

    def files(self, value: Any) -> Iterator[tuple[str, bool]]:
        return self.inner.files(value)


@dataclass(frozen=True)
class Later(Through):
    """A value its section reads itself, entry by entry (Named.entries), with what it declares."""
    kind: Kind

    @property
    def inner(self) -> Kind:
        return self.kind

    def normal(self, value: Any) -> Any:
        return value


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
class Typed(Through):
    """An object whose every key is a declared field of `cls`: read, it is a `cls`."""
    cls: type

    @property
    def inner(self) -> Obj:
        return declared(self.cls)

    def read(self, check: Checker, key: str, value: Any) -> Any:
        start = len(check.problems)
        values = self.inner.read(check, key, value)
        return build(self.cls, values) if values is not None \
            and len(check.problems) == start else None


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
    choices: Mapping[str, Kind]  # the key that marks it -> the object (an Obj or Typed)
    allowed: str

    def read(self, check: Checker, key: str, value: Any) -> Any:
        """The marked alternative, read; None when no one alternative is marked."""
        marks = [mark for mark in self.choices if isinstance(value, Mapping) and mark in value]
        if len(marks) != 1:
            check.fail(key, value, self.allowed + (" (required)" if value is MISSING else ""))
            return None
        return self.choices[marks[0]].read(check, key, value)

    def schema(self) -> dict:
        return {"oneOf": [kind.schema() for kind in self.choices.values()]}

    def files(self, value: Any) -> Iterator[tuple[str, bool]]:
        for kind in self.choices.values():
            yield from kind.files(value)


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
# Kinds of value more than one section declares

RUNTIME_DIR = Text(absolute_dir, "an absolute path other than / (letters, digits, '._+-/')")
HOST_KEY = Text(host_key_normal, HOST_KEY_TEXT)
HOSTNAME_KIND = pattern(HOSTNAME, "a host name, ~/.ssh/config alias or IP address")
USER_KIND = pattern(USER, "a user name")
# Checked with sshPrivateKeys.<name>: exactly one of the two (config/schema/common.py).
KEY_PATH = Raw({"type": "string"})
# A port backend's name: one of the `backends` table's (config/schema/common.py::port_backend).
BACKEND = Raw({"type": "string"})
SHA256 = Text(lambda v: v.lower() if is_sha256(v) else None, SHA256_TEXT)  # as sha256sum prints
COMMIT = Text(lambda v: v if is_commit(v) else None, COMMIT_TEXT, "^[0-9a-f]{40}$")
LOCATION = Text(expand_location, LOCATION_TEXT)
# A model repository's revision: its full commit id, never a branch (seed 001 step 2).
REVISION = Text(COMMIT.valid, COMMIT_TEXT.replace("a commit id", "the model repository's commit"
                                                   " id"), "^[0-9a-f]{40}$")
HF_REPO = pattern(re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*"),
                  "a Hugging Face repository id (<owner>/<name>)")
SERVED_NAME = pattern(re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"),
                      "a model name (letters, digits, '.', '_', '-'; at most 64)")


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
    elif isinstance(kind, Through):
        yield from paths(kind.inner, prefix)
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
