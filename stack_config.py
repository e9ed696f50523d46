"""Typed stack configuration: the only module that reads `pulumi.Config`.

`parse` is pure: the `spear-fleet` config namespace as plain Python values in (keys without
the `spear-fleet:` prefix, objects as dicts), frozen dataclasses out. It checks everything
and reports every problem at once, so a bad stack is refused before a single resource is
registered. `load` reads the namespace from the Pulumi runtime, calls `parse`, and turns the
SSH private key into a Pulumi secret.

The keys are documented in `stacks/Pulumi.*.yaml`.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import posixpath
import re
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi

NAMESPACE = "spear-fleet"

BACKENDS = ("local", "remote", "reds")
DEFAULT_BACKEND_PORTS = {"local": 8080, "remote": 8081, "reds": 8082}

# cmake flags that are a property of the build profile. GGML_NATIVE is off so a build does not
# depend on the CPU it was compiled on; the prebuilt web UI is off because fetching it needs
# the internet; tests and examples are off because only llama-server is installed.
_COMMON_CMAKE_FLAGS = (
    "-DGGML_NATIVE=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    # On by default when libssl-dev happens to be installed: off, so every host builds the same
    # thing (the server listens on loopback only and downloads nothing).
    "-DLLAMA_OPENSSL=OFF",
)
PROFILE_CMAKE_FLAGS = {
    "gpu": ("-DGGML_CUDA=ON", *_COMMON_CMAKE_FLAGS),
    "cpu": ("-DGGML_CUDA=OFF", *_COMMON_CMAKE_FLAGS),
}


# --------------------------------------------------------------------------------------------
# The typed configuration


@dataclass(frozen=True)
class SshTarget:
    host: str
    port: int
    user: str

    @property
    def is_loopback(self) -> bool:
        """True when the inference host is this machine (its ports share our port space)."""
        return _is_loopback(self.host)


@dataclass(frozen=True)
class InferenceHost:
    ssh: SshTarget
    runtime_dir: str  # absolute POSIX path on the host, normalised, no trailing slash
    backend: str  # one of BACKENDS: the client backend that reaches this server


@dataclass(frozen=True)
class GitSource:
    url: str
    commit: str  # 40 lowercase hex


@dataclass(frozen=True)
class ArchiveSource:
    archive: str  # absolute local path (`~` expanded) or http(s) URL
    sha256: str  # 64 lowercase hex
    subdir: str  # relative path of the llama.cpp tree inside the archive, "." for its root


@dataclass(frozen=True)
class LlamaCpp:
    source: GitSource | ArchiveSource
    profile: str  # "gpu" or "cpu"
    extra_cmake_flags: tuple[str, ...]

    @property
    def cmake_flags(self) -> tuple[str, ...]:
        """The profile's flags, then the stack's extra ones (cmake lets a later -D win)."""
        return PROFILE_CMAKE_FLAGS[self.profile] + self.extra_cmake_flags


@dataclass(frozen=True)
class Shard:
    name: str  # file name under <runtime>/models/gguf/
    size: int  # bytes
    sha256: str  # 64 lowercase hex
    source: str | None  # absolute local path (`~` expanded) or http(s) URL; None: already there


@dataclass(frozen=True)
class Model:
    arch: str  # llama.cpp architecture name, the prefix of its GGUF keys
    native_ctx: int  # the context length the model was trained at
    moe: bool
    shards: tuple[Shard, ...]
    adapter: str | None  # file name under <runtime>/models/lora/; None: the base model


@dataclass(frozen=True)
class Server:
    ctx_size: int
    host: str
    port: int
    threads: int | None
    gpu_layers: int | None
    cpu_moe: int | None  # MoE layers kept on the CPU; None: serve.sh's default for MoE models
    parallel: int


@dataclass(frozen=True)
class Backends:
    local: int
    remote: int
    reds: int

    def port(self, backend: str) -> int:
        return dataclasses.asdict(self)[backend]


@dataclass(frozen=True)
class FleetConfig:
    inference_host: InferenceHost
    # parse(): the inline key text, or None when the stack names a key file instead.
    # load(): always a secret Output holding the key text, whichever way it was given.
    ssh_private_key: pulumi.Input[str] | None
    ssh_private_key_path: str | None  # `~` expanded; None when the key is inline
    llama_cpp: LlamaCpp
    model: Model
    server: Server
    backends: Backends

    @property
    def client_port(self) -> int:
        """The client-side port of the backend that reaches this server."""
        return self.backends.port(self.inference_host.backend)


# --------------------------------------------------------------------------------------------
# Errors


@dataclass(frozen=True)
class Problem:
    key: str  # full key path, e.g. "spear-fleet:server.ctxSize"
    given: str  # what the stack said, as shown to the user
    allowed: str

    def __str__(self) -> str:
        return f"{self.key}: got {self.given}; allowed: {self.allowed}"


class ConfigError(pulumi.RunError):
    """Every problem found in the stack config, one per line.

    A RunError, so Pulumi prints the message without a Python traceback.
    """

    def __init__(self, *problems: Problem) -> None:
        self.problems = problems
        super().__init__("invalid stack config:\n" + "\n".join(str(p) for p in problems))


# --------------------------------------------------------------------------------------------
# Checking


class _Missing:
    def __repr__(self) -> str:
        return "nothing"


MISSING: Any = _Missing()  # a key the stack does not set (None is a value YAML can give)

_SHA256 = re.compile(r"[0-9a-fA-F]{64}")
_COMMIT = re.compile(r"[0-9a-f]{40}")
_ARCH = re.compile(r"[a-z0-9_]+")
# Names and paths end up in a shell-sourced file, a systemd unit and remote shell commands:
# keep them to characters that need no quoting anywhere.
_FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
_SAFE_PATH = re.compile(r"[A-Za-z0-9._+/-]+")
_HOSTNAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*")
_USER = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_CMAKE_FLAG = re.compile(r"-D[A-Za-z_][A-Za-z0-9_]*(:[A-Z]+)?=\S*")
_GIT_URL = re.compile(r"[^\s-]\S*")  # no whitespace, and not an option to git

_FILE_NAME_TEXT = "a file name (letters, digits, '.', '_', '+', '-'; no '/')"
_LOCATION_TEXT = "an absolute local path (or ~/...) or an http(s) URL"


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _is_loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _expand_location(value: str) -> str | None:
    """An http(s) URL as is, a local path with `~` expanded; None when it is neither."""
    url = urllib.parse.urlparse(value)
    if url.scheme in ("http", "https"):
        return value if url.netloc and not any(c.isspace() for c in value) else None
    path = os.path.expanduser(value)
    return path if os.path.isabs(path) and "\n" not in path else None


def _relative_subdir(value: str) -> str | None:
    path = posixpath.normpath(value)
    if _SAFE_PATH.fullmatch(value) and not path.startswith("/") and ".." not in path.split("/"):
        return path
    return None


class _Checker:
    """Collects problems; each method returns the checked value, or None after a problem."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def fail(self, key: str, given: Any, allowed: str) -> None:
        self.report(key, _show(given), allowed)

    def report(self, key: str, described: str, allowed: str) -> None:
        """Like fail, for a value that is described rather than shown (secrets, unknown keys)."""
        self.problems.append(Problem(f"{NAMESPACE}:{key}", described, allowed))

    def clean_since(self, start: int) -> bool:
        """True when no problem was found since len(self.problems) was `start`."""
        return len(self.problems) == start

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
        # YAML gives numbers; `pulumi config set --path` without --type may give digit strings.
        number = int(value) if isinstance(value, str) and value.isdigit() else value
        if isinstance(number, bool) or not isinstance(number, int) \
                or number < lo or (hi is not None and number > hi):
            self.fail(key, value, what)
            return None
        return number

    def optional_integer(self, key: str, value: Any, lo: int) -> int | None:
        return None if value is MISSING else self.integer(key, value, lo, note="optional")

    def port(self, key: str, value: Any, default: int) -> int | None:
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

    def sha256(self, key: str, value: Any) -> str | None:
        digest = self.pattern(key, value, _SHA256, "64 hex characters (a sha256 digest)")
        return digest.lower() if digest else None

    def choice(self, key: str, value: Any, choices: Sequence[str],
               default: str | None = None) -> str | None:
        return self.text(key, value, lambda v: v if v in choices else None,
                         "one of " + ", ".join(choices), default)

    def boolean(self, key: str, value: Any, default: bool) -> bool:
        if value is MISSING:
            return default
        if not isinstance(value, bool):
            self.fail(key, value, "true or false")
            return default
        return value


def _get(mapping: Mapping[str, Any], key: str) -> Any:
    return mapping.get(key, MISSING)


# --------------------------------------------------------------------------------------------
# parse


_TOP_KEYS = ("inferenceHost", "sshPrivateKey", "sshPrivateKeyPath", "llamaCpp", "model",
             "server", "backends")


def parse(raw: Mapping[str, Any]) -> FleetConfig:
    """Check the whole `spear-fleet` namespace and type it; ConfigError lists every problem."""
    check = _Checker()
    for unknown in sorted(set(raw) - set(_TOP_KEYS)):
        check.report(unknown, "an unknown key", "one of " + ", ".join(_TOP_KEYS))

    inference_host = _inference_host(check, _get(raw, "inferenceHost"))
    private_key, private_key_path = _ssh_key(check, _get(raw, "sshPrivateKey"),
                                             _get(raw, "sshPrivateKeyPath"))
    llama_cpp = _llama_cpp(check, _get(raw, "llamaCpp"))
    model = _model(check, _get(raw, "model"))
    server = _server(check, _get(raw, "server"), moe=model.moe if model else None)
    backends = _backends(check, _get(raw, "backends"))
    if inference_host and server and backends:
        _check_port_clashes(check, inference_host, server, backends)

    if check.problems:
        raise ConfigError(*check.problems)
    return FleetConfig(inference_host, private_key, private_key_path, llama_cpp, model, server,
                       backends)


def _inference_host(check: _Checker, value: Any) -> InferenceHost | None:
    start = len(check.problems)
    host = check.obj("inferenceHost", value, ("ssh", "runtimeDir", "backend"))
    if host is None:
        return None
    ssh = check.obj("inferenceHost.ssh", _get(host, "ssh"), ("host", "port", "user"))
    result = InferenceHost(
        ssh=None if ssh is None else SshTarget(
            host=check.pattern("inferenceHost.ssh.host", _get(ssh, "host"), _HOSTNAME,
                               "a host name, ~/.ssh/config alias or IP address"),
            port=check.port("inferenceHost.ssh.port", _get(ssh, "port"), 22),
            user=check.pattern("inferenceHost.ssh.user", _get(ssh, "user"), _USER, "a user name",
                               default="root"),
        ),
        runtime_dir=check.text("inferenceHost.runtimeDir", _get(host, "runtimeDir"), _runtime_dir,
                               "an absolute path other than / (letters, digits, '._+-/')",
                               default="/opt/spear"),
        backend=check.choice("inferenceHost.backend", _get(host, "backend"), BACKENDS,
                             default="reds"),
    )
    return result if check.clean_since(start) else None


def _runtime_dir(value: str) -> str | None:
    path = posixpath.normpath(value)
    return path if _SAFE_PATH.fullmatch(value) and path.startswith("/") and path != "/" else None


def _ssh_key(check: _Checker, inline: Any, path: Any) -> tuple[str | None, str | None]:
    one_of = ("exactly one of sshPrivateKey (a secret: pulumi config set --secret sshPrivateKey "
              "< key) or sshPrivateKeyPath (a key file)")
    if inline is MISSING and path is MISSING:
        check.fail("sshPrivateKey", MISSING, one_of)
        return None, None
    if inline is not MISSING and path is not MISSING:
        check.report("sshPrivateKeyPath", "a key file as well as sshPrivateKey", one_of)
        return None, None
    if path is not MISSING:
        expanded = check.text("sshPrivateKeyPath", path,
                              lambda v: os.path.expanduser(v) if v.strip() else None,
                              "a path to a private key file")
        return None, expanded
    if not isinstance(inline, str) or "PRIVATE KEY-----" not in inline:
        # Describe the secret, never echo it.
        described = (f"a secret of {len(inline)} characters without a PEM/OpenSSH header"
                     if isinstance(inline, str) else f"a secret of type {type(inline).__name__}")
        check.report("sshPrivateKey", described, "a private key (-----BEGIN ... PRIVATE KEY-----)")
        return None, None
    return inline, None


def _llama_cpp(check: _Checker, value: Any) -> LlamaCpp | None:
    start = len(check.problems)
    llama = check.obj("llamaCpp", value, ("source", "profile", "extraCmakeFlags"))
    if llama is None:
        return None
    source = _source(check, _get(llama, "source"))
    profile = check.choice("llamaCpp.profile", _get(llama, "profile"), tuple(PROFILE_CMAKE_FLAGS))
    flags_value = _get(llama, "extraCmakeFlags")
    flags: list[str | None] = []
    if flags_value is not MISSING and not isinstance(flags_value, list):
        check.fail("llamaCpp.extraCmakeFlags", flags_value, "a list of -DNAME=value strings")
    elif flags_value is not MISSING:
        flags = [check.pattern(f"llamaCpp.extraCmakeFlags[{i}]", flag, _CMAKE_FLAG,
                               "a -DNAME=value (or -DNAME:TYPE=value) string")
                 for i, flag in enumerate(flags_value)]
    return LlamaCpp(source, profile, tuple(flags)) if check.clean_since(start) else None


def _source(check: _Checker, value: Any) -> GitSource | ArchiveSource | None:
    key = "llamaCpp.source"
    if not isinstance(value, Mapping) or ("git" in value) == ("archive" in value):
        check.fail(key, value, "either {git, commit} or {archive, sha256, subdir}"
                   + (" (required)" if value is MISSING else ""))
        return None
    if "git" in value:
        source = check.obj(key, value, ("git", "commit"))
        return GitSource(
            url=check.pattern(f"{key}.git", source["git"], _GIT_URL, "a git URL or path"),
            commit=check.pattern(
                f"{key}.commit", _get(source, "commit"), _COMMIT,
                "a commit id of 40 lowercase hex characters (a branch or tag name is refused: "
                "it moves, and a build must not)"),
        )
    source = check.obj(key, value, ("archive", "sha256", "subdir"))
    return ArchiveSource(
        archive=check.text(f"{key}.archive", source["archive"], _expand_location, _LOCATION_TEXT),
        sha256=check.sha256(f"{key}.sha256", _get(source, "sha256")),
        subdir=check.text(f"{key}.subdir", _get(source, "subdir"), _relative_subdir,
                          "a relative path inside the archive, without '..'", default="."),
    )


def _model(check: _Checker, value: Any) -> Model | None:
    start = len(check.problems)
    model = check.obj("model", value, ("arch", "nativeCtx", "moe", "shards", "adapter"))
    if model is None:
        return None
    adapter = _get(model, "adapter")
    result = Model(
        arch=check.pattern("model.arch", _get(model, "arch"), _ARCH,
                           "a llama.cpp architecture name ([a-z0-9_]+, e.g. qwen3next, llama)"),
        native_ctx=check.integer("model.nativeCtx", _get(model, "nativeCtx"), 1,
                                 note="required: the context length it was trained at"),
        moe=check.boolean("model.moe", _get(model, "moe"), default=False),
        shards=_shards(check, _get(model, "shards")),
        adapter=None if adapter in (MISSING, None, "none") else check.pattern(
            "model.adapter", adapter, _FILE_NAME,
            _FILE_NAME_TEXT + " under <runtime>/models/lora/, or none for the base model"),
    )
    return result if check.clean_since(start) else None


def _shards(check: _Checker, value: Any) -> tuple[Shard, ...]:
    what = "a non-empty list of {name, size, sha256, source?}"
    if value is MISSING or not isinstance(value, list) or not value:
        check.fail("model.shards", value, what + (" (required)" if value is MISSING else ""))
        return ()
    shards: list[Shard] = []
    for i, item in enumerate(value):
        key = f"model.shards[{i}]"
        shard = check.obj(key, item, ("name", "size", "sha256", "source"))
        if shard is None:
            continue
        name = check.pattern(f"{key}.name", _get(shard, "name"), _FILE_NAME, _FILE_NAME_TEXT)
        if name is not None and name in (s.name for s in shards):
            check.fail(f"{key}.name", name, "a name no other shard has")
        source = _get(shard, "source")
        shards.append(Shard(
            name=name,
            size=check.integer(f"{key}.size", _get(shard, "size"), 1,
                               note="required: the file size in bytes"),
            sha256=check.sha256(f"{key}.sha256", _get(shard, "sha256")),
            source=None if source is MISSING else check.text(
                f"{key}.source", source, _expand_location, _LOCATION_TEXT),
        ))
    return tuple(shards)


def _server(check: _Checker, value: Any, moe: bool | None) -> Server | None:
    start = len(check.problems)
    server = check.obj("server", value,
                       ("ctxSize", "host", "port", "threads", "gpuLayers", "cpuMoe", "parallel"))
    if server is None:
        return None
    result = Server(
        ctx_size=check.integer("server.ctxSize", _get(server, "ctxSize"), 1,
                               note="no default: state it in the stack"),
        host=check.text("server.host", _get(server, "host"), _ip_address, "an IP address",
                        default="127.0.0.1"),
        port=check.port("server.port", _get(server, "port"), 8080),
        threads=check.optional_integer("server.threads", _get(server, "threads"), 1),
        gpu_layers=check.optional_integer("server.gpuLayers", _get(server, "gpuLayers"), 0),
        cpu_moe=check.optional_integer("server.cpuMoe", _get(server, "cpuMoe"), 0),
        parallel=check.integer("server.parallel", _get(server, "parallel"), 1, default=1),
    )
    if result.cpu_moe is not None and moe is False:
        check.fail("server.cpuMoe", result.cpu_moe,
                   "only with model.moe: true (it keeps mixture-of-experts layers on the CPU)")
    return result if check.clean_since(start) else None


def _ip_address(value: str) -> str | None:
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        return None


def _backends(check: _Checker, value: Any) -> Backends | None:
    start = len(check.problems)
    backends = check.obj("backends", value, BACKENDS, required=False)
    if backends is None:
        return None
    ports = {name: check.port(f"backends.{name}", _get(backends, name), default)
             for name, default in DEFAULT_BACKEND_PORTS.items()}
    if not check.clean_since(start):
        return None
    for i, name in enumerate(BACKENDS):
        clash = next((other for other in BACKENDS[:i] if ports[other] == ports[name]), None)
        if clash:
            check.fail(f"backends.{name}", ports[name],
                       f"a port other than backends.{clash} ({ports[clash]}): the tunnels of "
                       "different backends must be able to be up at once")
    return Backends(**ports) if check.clean_since(start) else None


def _check_port_clashes(check: _Checker, host: InferenceHost, server: Server,
                        backends: Backends) -> None:
    """On a loopback host the server shares this machine's ports with the client side."""
    if not host.ssh.is_loopback:
        return
    taken = {f"backends.{host.backend} (the client port of backend {host.backend})":
             backends.port(host.backend),
             "inferenceHost.ssh.port (the SSH port)": host.ssh.port}
    for what, port in taken.items():
        if server.port == port:
            check.fail("server.port", server.port,
                       f"a port other than {what}, since inferenceHost.ssh.host "
                       f"{host.ssh.host} is this machine")


# --------------------------------------------------------------------------------------------
# load


_OBJECT_KEYS = ("inferenceHost", "llamaCpp", "model", "server", "backends")


def _namespace_keys() -> set[str]:
    """Every key the stack sets in our namespace, so that unknown ones can be refused.

    pulumi.Config cannot list keys; the language host hands the whole config map to
    set_all_config (and mocks set it the same way), with PULUMI_CONFIG as the fallback.
    """
    full_keys = set(pulumi.runtime.config.CONFIG.get()) | set(pulumi.runtime.get_config_env())
    prefix = NAMESPACE + ":"
    return {key[len(prefix):] for key in full_keys if key.startswith(prefix)}


def _read_raw() -> dict[str, Any]:
    config = pulumi.Config(NAMESPACE)
    raw: dict[str, Any] = {}
    for key in _namespace_keys() | set(_TOP_KEYS):
        if key in _OBJECT_KEYS:
            try:
                value = config.get_object(key)
            except pulumi.ConfigTypeError:
                value = config.get(key)  # not JSON: let parse say what an object must look like
        else:
            value = config.get(key)
        if value is not None:
            raw[key] = value
    return raw


def load() -> FleetConfig:
    """Read, check and type the stack config; raise ConfigError before any resource exists."""
    raw = _read_raw()
    problems: list[Problem] = []
    if "sshPrivateKey" in raw and not pulumi.runtime.is_config_secret(f"{NAMESPACE}:sshPrivateKey"):
        problems.append(Problem(f"{NAMESPACE}:sshPrivateKey", "a plain-text value",
                                "a secret: pulumi config set --secret sshPrivateKey < key"))
    try:
        cfg: FleetConfig | None = parse(raw)
    except ConfigError as error:
        problems[:0] = error.problems
        cfg = None
    key_text = cfg.ssh_private_key if cfg else None
    if cfg and cfg.ssh_private_key_path:
        try:
            with open(cfg.ssh_private_key_path, encoding="utf-8") as key_file:
                key_text = key_file.read()
        except OSError as error:
            problems.append(Problem(f"{NAMESPACE}:sshPrivateKeyPath",
                                    _show(cfg.ssh_private_key_path),
                                    f"a readable private key file ({error.strerror})"))
    if problems or cfg is None:
        raise ConfigError(*problems)
    return dataclasses.replace(cfg, ssh_private_key=pulumi.Output.secret(key_text))
