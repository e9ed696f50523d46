"""Builds what the local Kubernetes cluster runs (control plane, a real node: kubelet, kube-proxy,
containerd, runc, the CNI plugins, the pause image's binary) and the pulumi-kubernetes provider
plugin, from Go modules (none of them can be downloaded as release binaries here).

Each artifact is a folder `$SPEAR_CACHE/kubernetes/<name>-<key>/`, keyed by its recipe: the pinned
modules (a go.mod + go.sum under localhosts/kube/, or a module version), the build flags, the Go
version and RECIPE. It is built in a temporary folder beside it and renamed into place, so a
folder that exists is complete and is reused as it is. CLI: scripts/setup-kubernetes.sh.

The Go build and module caches are Go's own defaults (~/.cache/go-build, ~/go/pkg/mod), the ones
scripts/setup-engine.sh fills. The artifacts share compiled packages where their versions meet:
the provider's go.mod (localhosts/kube/provider/) raises the modules it shares with the engine to
the engine's versions, so the engine's packages (Pulumi's SDK, gRPC, protobuf) are compiled once
(docs/BENCHMARKS.md, the Go builds); its client-go stays upstream's, as Kubernetes' own no longer
has API groups the provider uses.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from components.cache import cache_dir

# Bump when a build step below changes in a way the keyed inputs do not show.
RECIPE = 2
KUBE_MODULES = Path(__file__).resolve().parent
# The Go build settings the engine's build uses too (scripts/setup-engine.sh).
GO_BUILD_ENV = Path(__file__).resolve().parents[2] / "engine" / "go-build.env"

KUBERNETES_VERSION = "v1.37.2"
# One go build: the node's binaries share most packages with the control plane's.
KUBERNETES_BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet",
                       "kube-proxy", "kubectl")
ETCD_MODULE = "go.etcd.io/etcd/server/v3"
CONTAINERD_MODULE = "github.com/containerd/containerd/v2"
CONTAINERD_VERSION = "v2.4.2"
CONTAINERD_BINARIES = ("containerd", "containerd-shim-runc-v2", "ctr")
CNI_MODULE = "github.com/containernetworking/plugins"
CNI_PLUGINS = ("ipam/host-local", "main/bridge", "main/loopback", "meta/portmap")
# The NetworkPolicy enforcer (localhosts/kube/network_policies.py runs it); its main package is `cmd`,
# which `go build -o <folder>/` names the binary after. It is built with one patch: this kernel
# has no nftables queue expression (CONFIG_NFT_QUEUE is not set), so the patch sends packets to the
# same nfqueue through the xtables NFQUEUE target, which it has.
NETPOL_MODULE = "sigs.k8s.io/kube-network-policies"
NETPOL_BINARY = "kube-network-policies"
NETPOL_PATCH = KUBE_MODULES / "node" / "kube-network-policies-xt-nfqueue.patch"
RUNC_VERSION = "1.5.3"
GVISOR_MODULE = "gvisor.dev/gvisor"
GVISOR_SHIM = "containerd-shim-runsc-v1"
GVISOR_PATCH = KUBE_MODULES / "gvisor" / "shim-oom-score.patch"
# The sandbox ("pause") container's program, from the Kubernetes module's own source: nothing can
# be pulled here, and the kubelet needs the image.
PAUSE_SOURCE = "build/pause/linux/pause.c"
# The only provider commit the Go module proxy serves: upstream tag v4.25.0 (PyPI
# pulumi-kubernetes==4.25.0 in requirements.txt must match).
PROVIDER_VERSION = "4.25.0"
PROVIDER_MODULE = "github.com/pulumi/pulumi-kubernetes/provider/v4"
PROVIDER_MODULE_VERSION = "v4.0.0-20260115033456-f47bc2d6f199"
PROVIDER_SDK_MODULE = "github.com/pulumi/pulumi-kubernetes/sdk/v4"
PROVIDER_BINARY = "pulumi-resource-kubernetes"
PROVIDER_PATCH = KUBE_MODULES / "provider" / "codegen-schema-pointer.patch"
# Copied over upstream's in the provider's source before its build (the engine's versions).
PROVIDER_MODULE_FILES = ("go.mod", "go.sum")


class BuildError(RuntimeError):
    pass


def _say(message: str) -> None:
    print(f"setup-kubernetes: {message}", file=sys.stderr, flush=True)


def go_build_settings() -> dict[str, str]:
    """engine/go-build.env's variables (KEY=value lines, values quoted as in a shell)."""
    lines = [line for line in GO_BUILD_ENV.read_text().splitlines() if line and not line.startswith("#")]
    return dict(shlex.split(line)[0].split("=", 1) for line in lines)


def _go_env(cgo: bool) -> dict[str, str]:
    if not shutil.which("go"):
        raise BuildError("needs Go (https://go.dev/dl) to build the Kubernetes binaries and provider plugin")
    return {**os.environ, **go_build_settings(), "CGO_ENABLED": "1" if cgo else "0"}


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise BuildError(f"{' '.join(args)} failed in {cwd}:\n{done.stderr.strip()}")
    return done.stdout


def _go(args: list[str], cwd: Path, cgo: bool = False) -> str:
    return _run(["go", *args], cwd, _go_env(cgo))


def _key(*parts: str | bytes) -> str:
    digest = hashlib.sha256()
    go_version = _go(["env", "GOVERSION"], Path.cwd()).strip()
    for part in (str(RECIPE), go_version, GO_BUILD_ENV.read_text(), *parts):
        data = part.encode() if isinstance(part, str) else part
        digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()[:16]


def _module_files(folder: Path) -> list[bytes]:
    return [(folder / name).read_bytes() for name in ("go.mod", "go.sum", "tools.go")]


def _module_dir(module: str, version: str | None = None, cwd: Path | None = None) -> Path:
    """The read-only source folder of a module in the module cache (downloaded if needed): at
    `version`, or at the version the go.mod in `cwd` requires."""
    spec = f"{module}@{version}" if version else module
    info = json.loads(_go(["mod", "download", "-json", spec], cwd or Path(tempfile.gettempdir())))
    return Path(info["Dir"])


def _writable_copy(module: Path, to: Path) -> Path:
    """A copy of a module's read-only source folder that a build may change."""
    shutil.copytree(module, to)
    for path in (to, *to.rglob("*")):
        path.chmod(path.stat().st_mode | 0o200)
    return to


def _with_patched(folder: Path, module: str, patch: Path, work: Path) -> None:
    """A copy of the build module `folder` in work/<its name>, its dependency `module` replaced
    by a copy beside it (work/patched) with `patch` applied."""
    shutil.copytree(folder, work / folder.name)
    patched = _writable_copy(_module_dir(module, cwd=folder), work / "patched")
    _run(["git", "apply", str(patch)], patched)
    _go(["mod", "edit", f"-replace={module}={patched}"], work / folder.name)


def _version_ldflags(prefixes: tuple[str, ...], version: str) -> str:
    major, minor = version.lstrip("v").split(".")[:2]
    stamps = []
    for prefix in prefixes:
        stamps += [f"-X {prefix}.gitVersion={version}", f"-X {prefix}.gitMajor={major}",
                   f"-X {prefix}.gitMinor={minor}"]
    return " ".join(["-s -w", *stamps])


@dataclass(frozen=True)
class Artifact:
    """One cached build: `folder` holds `files` once it is complete."""

    name: str
    key: str
    files: tuple[str, ...]
    build: Callable[[Path], None]  # fills a temporary folder with `files`

    @property
    def folder(self) -> Path:
        return cache_dir() / "kubernetes" / f"{self.name}-{self.key}"

    def path(self, file: str) -> Path:
        return self.folder / file

    def ready(self) -> bool:
        return all((self.folder / f).is_file() for f in self.files)

    def ensure(self) -> Path:
        if self.ready():
            _say(f"{self.name}: cached")
            return self.folder
        self.folder.parent.mkdir(parents=True, exist_ok=True)
        # A second caller (a test waiting for the build scripts/test started in the background)
        # waits for the first instead of building the same thing again.
        with open(self.folder.parent / f".{self.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if self.ready():
                return self.folder
            return self._build()

    def _build(self) -> Path:
        tmp = Path(tempfile.mkdtemp(prefix=f"{self.folder.name}.tmp.", dir=self.folder.parent))
        started = time.monotonic()
        _say(f"building {self.name} (first time only; minutes on 2 cores)")
        try:
            self.build(tmp)
            missing = [f for f in self.files if not (tmp / f).is_file()]
            if missing:
                raise BuildError(f"the {self.name} build made no {', '.join(missing)}")
            tmp.chmod(0o755)
            try:
                tmp.rename(self.folder)  # complete folders only
            except OSError:
                if not self.ready():
                    raise
                # another set-up finished the same build first: keep that one
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        _say(f"built {self.name} in {time.monotonic() - started:.0f} s -> {self.folder}")
        return self.folder


def kubernetes() -> Artifact:
    folder = KUBE_MODULES / "kubernetes"
    ldflags = _version_ldflags(("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"),
                               KUBERNETES_VERSION)

    def build(out: Path) -> None:
        _go(["build", "-ldflags", ldflags, "-o", f"{out}/",
             *(f"k8s.io/kubernetes/cmd/{name}" for name in KUBERNETES_BINARIES)], folder)
        pause = _module_dir("k8s.io/kubernetes", cwd=folder) / PAUSE_SOURCE
        _run(["cc", "-Os", "-static", "-o", str(out / "pause"), str(pause)], folder)

    return Artifact("kubernetes", _key(ldflags, PAUSE_SOURCE, *_module_files(folder)),
                    (*KUBERNETES_BINARIES, "pause"), build)


def etcd() -> Artifact:
    folder = KUBE_MODULES / "etcd"

    def build(out: Path) -> None:
        _go(["build", "-ldflags", "-s -w", "-o", str(out / "etcd"), ETCD_MODULE], folder)

    return Artifact("etcd", _key("-s -w", *_module_files(folder)), ("etcd",), build)


def node() -> Artifact:
    """containerd, its runc shim and ctr, the CNI plugins, kube-network-policies (static, one go
    build) and runc (cgo, with libseccomp: Debian's libseccomp-dev, which scripts/setup.sh
    installs)."""
    folder = KUBE_MODULES / "node"
    static = f"-s -w -X {CONTAINERD_MODULE}/version.Version={CONTAINERD_VERSION}"
    runc = f"-s -w -X main.version={RUNC_VERSION}"
    cni = tuple(name.rsplit("/", 1)[1] for name in CNI_PLUGINS)

    def build(out: Path) -> None:
        work = out / "src"
        _with_patched(folder, NETPOL_MODULE, NETPOL_PATCH, work)
        _go(["build", "-ldflags", static, "-o", f"{out}/",
             *(f"{CONTAINERD_MODULE}/cmd/{name}" for name in CONTAINERD_BINARIES),
             *(f"{CNI_MODULE}/plugins/{name}" for name in CNI_PLUGINS), f"{NETPOL_MODULE}/cmd"],
            work / "node")
        (out / "cmd").rename(out / NETPOL_BINARY)
        _go(["build", "-tags", "seccomp urfave_cli_no_docs", "-ldflags", runc, "-o", str(out / "runc"),
             "github.com/opencontainers/runc"], work / "node", cgo=True)
        shutil.rmtree(work)

    return Artifact("node", _key(static, runc, *_module_files(folder), NETPOL_PATCH.read_bytes()),
                    (*CONTAINERD_BINARIES, *cni, NETPOL_BINARY, "runc"), build)


def gvisor() -> Artifact:
    """gVisor's runsc and its containerd shim (static), the node's sandbox runtime: the
    RuntimeClass `gvisor` (localhosts/kube/kubecluster.py) runs a seat under gVisor's own kernel. The
    shim is built with one patch (GVISOR_PATCH): this machine refuses it the OOM score it sets
    on itself, which upstream treats as fatal and the patch lets go; the rest is upstream's."""
    folder = KUBE_MODULES / "gvisor"

    def build(out: Path) -> None:
        work = out / "src"
        _with_patched(folder, GVISOR_MODULE, GVISOR_PATCH, work)
        for binary, package in (("runsc", "runsc"), (GVISOR_SHIM, "shim")):
            _go(["build", "-ldflags", "-s -w", "-o", str(out / binary),
                 f"{GVISOR_MODULE}/{package}"], work / folder.name)
        shutil.rmtree(work)

    return Artifact("gvisor", _key("-s -w", *_module_files(folder), GVISOR_PATCH.read_bytes()),
                    ("runsc", GVISOR_SHIM), build)


def provider() -> Artifact:
    folder = KUBE_MODULES / "provider"
    ldflags = f"-s -w -X {PROVIDER_MODULE}/pkg/version.Version={PROVIDER_VERSION}"

    def build(out: Path) -> None:
        # The provider's go.mod replaces its SDK with ../sdk: a writable copy of the module with the
        # SDK module beside it, built with this project's go.mod and go.sum (the engine's versions).
        work = out / "src"
        _writable_copy(_module_dir(PROVIDER_MODULE, PROVIDER_MODULE_VERSION), work / "provider")
        _writable_copy(_module_dir(PROVIDER_SDK_MODULE, f"v{PROVIDER_VERSION}"), work / "sdk")
        for name in PROVIDER_MODULE_FILES:
            shutil.copyfile(folder / name, work / "provider" / name)
        _run(["git", "apply", str(PROVIDER_PATCH)], work / "provider")
        cmd = work / "provider" / "cmd" / PROVIDER_BINARY
        # What upstream's `go generate` does: the two files the binary embeds, gitignored upstream.
        schema = json.loads((cmd / "schema.json").read_text())
        schema["version"] = PROVIDER_VERSION
        (cmd / "schema-embed.json").write_text(json.dumps(schema, separators=(",", ":")))
        mapping = json.loads((cmd / "terraform-mapping.json").read_text())
        (cmd / "terraform-mapping-embed.json").write_text(json.dumps(mapping, separators=(",", ":")))
        _go(["build", "-ldflags", ldflags, "-o", str(out / PROVIDER_BINARY), f"./cmd/{PROVIDER_BINARY}"],
            work / "provider")
        shutil.rmtree(work)

    key = _key(ldflags, f"{PROVIDER_MODULE}@{PROVIDER_MODULE_VERSION}",
               f"{PROVIDER_SDK_MODULE}@v{PROVIDER_VERSION}", "schema-embed.json terraform-mapping-embed.json",
               *((folder / name).read_bytes() for name in PROVIDER_MODULE_FILES), PROVIDER_PATCH.read_bytes())
    return Artifact("provider", key, (PROVIDER_BINARY,), build)


def artifacts() -> dict[str, Artifact]:
    """Every artifact by name, in build order: the provider first, since the tests that need only
    it (a fleet's preview, the policy pack) can then start while the cluster's binaries build;
    then the cluster's, smallest first."""
    return {a.name: a for a in (provider(), etcd(), gvisor(), node(), kubernetes())}


def provider_plugin_dir() -> Path:
    """Where the pulumi CLI keeps the installed provider plugin."""
    home = Path(os.environ.get("PULUMI_HOME") or Path.home() / ".pulumi")
    return home / "plugins" / f"resource-kubernetes-v{PROVIDER_VERSION}"


def provider_plugin_installed() -> bool:
    plugin = provider_plugin_dir()  # a .partial file beside it marks an unfinished install
    return (plugin / PROVIDER_BINARY).is_file() and not plugin.with_name(plugin.name + ".partial").exists()


def install_provider_plugin() -> Path:
    """The installed provider plugin's folder: a user's own install is kept as it is; otherwise the
    plugin is built (or taken from the cache) and installed with the pulumi CLI on PATH."""
    if provider_plugin_installed():
        return provider_plugin_dir()
    lock_dir = cache_dir() / "kubernetes"
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / ".plugin.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _install_provider_plugin()


def _install_provider_plugin() -> Path:
    if provider_plugin_installed():
        return provider_plugin_dir()
    pulumi = shutil.which("pulumi")
    if not pulumi:
        raise BuildError("no pulumi CLI on PATH to install the provider plugin with (source scripts/env.sh)")
    binary = provider().ensure() / PROVIDER_BINARY
    _say(f"installing the kubernetes provider plugin v{PROVIDER_VERSION}")
    done = subprocess.run([pulumi, "plugin", "install", "resource", "kubernetes", PROVIDER_VERSION,
                           "--file", str(binary)], env=dict(os.environ, PULUMI_SKIP_UPDATE_CHECK="true"),
                          stdout=sys.stderr)
    if done.returncode != 0:
        raise BuildError(f"pulumi plugin install resource kubernetes {PROVIDER_VERSION} failed")
    return provider_plugin_dir()


def ensure_all() -> list[Path]:
    """Every artifact of the cluster built and the provider plugin installed (what the cluster
    and the fleet's tests need)."""
    return [install_provider_plugin() if name == "provider" else artifact.ensure()
            for name, artifact in artifacts().items()]


def main(argv: list[str]) -> int:
    """Builds the named artifacts (none: all) and installs the provider plugin. `--build-only`
    leaves the plugin to whoever needs it (install_provider_plugin): scripts/test starts the
    build before the engine the install runs exists."""
    build_only = "--build-only" in argv
    try:
        found = artifacts()
        names = [a for a in argv if a != "--build-only"] or list(found)
        unknown = [n for n in names if n not in found]
        if unknown:
            raise BuildError(f"unknown artifact {', '.join(unknown)}; allowed: {', '.join(found)},"
                             " and the option --build-only")
        for name in names:
            plugin = name == "provider" and not build_only
            print(install_provider_plugin() if plugin else found[name].ensure())
    except BuildError as exc:
        print(f"setup-kubernetes: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
