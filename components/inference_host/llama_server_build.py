"""llama-server, built on the inference host from a pinned source.

The build lives in `<runtime>/builds/<build key>`, where the key is a digest of what decides
the binary: the source's content pin (commit, or archive sha256 and subdir), the cmake flags and
the build script. A new pin, new flags or an edited script is a new key, so the resource is
replaced (a rebuild); anything else leaves it alone. A finished build is never thrown away by a
replacement or a destroy: a re-created resource with a key that was built before reuses it at
once. Fetches and builds of one key take turns under `<runtime>/builds/<build key>.lock`.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
from pulumi.dynamic import ReadResult

from components.hostops.host_resource import HostProvider, HostResource
from components.hostops.ssh import RemoteError, Session, tail
from config.types import ArchiveSource, GitSource
from review.kinds import CONFIG_ONLY, REBUILD, Change, Kind, mapping_details, updates_only
from spear import tokens

BUILD_SCRIPT = Path(__file__).resolve().parents[2] / "hosts" / "inference" / "build-llama-server.sh"


def source_input(source: GitSource | ArchiveSource) -> dict[str, str]:
    if isinstance(source, GitSource):
        return {"git": source.url, "commit": source.commit}
    return {"archive": source.archive, "sha256": source.sha256, "subdir": source.subdir}


def build_key(source: dict[str, str], cmake_flags: list[str], build_script: str | None = None) -> str:
    """What the binary depends on: the content pin (not where the source is fetched from), the
    cmake flags, and the text of the build script (by default the one in hosts/inference/)."""
    pin = {k: source[k] for k in ("commit", "sha256", "subdir") if k in source}
    script = BUILD_SCRIPT.read_text() if build_script is None else build_script
    canonical = json.dumps({"source": pin, "cmake_flags": list(cmake_flags),
                            "build_script": hashlib.sha256(script.encode()).hexdigest()},
                           sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def build_dir(runtime_dir: str, key: str) -> str:
    return posixpath.join(runtime_dir, "builds", key)


def under_build_lock(folder: str, steps: list[str]) -> str:
    """A host command running shell `steps` (up to the first failure) while it holds an exclusive
    lock on `<folder>.lock`. Hosts may share the builds folder (the local hosts bind-mount one)
    and deployments may overlap: so the source is never replaced under a build in progress, and
    a second build of a key waits for the first, then finds the folder complete."""
    q = shlex.quote
    script = "\n".join(["set -e", *steps])
    return f"mkdir -p {q(posixpath.dirname(folder))} && flock {q(folder + '.lock')} bash -c {q(script)}"


@dataclass
class LlamaServerBuildArgs:
    connection: pulumi.Input[dict]
    runtime_dir: str
    source: GitSource | ArchiveSource
    cmake_flags: tuple[str, ...]
    # A build takes about 20 min on 2 CPU cores; a GPU host with CUDA takes longer.
    timeout_seconds: int = 3 * 3600


class LlamaServerBuildProvider(HostProvider):
    replace_fields = ("build_key", "runtime_dir")

    def resource_id(self, props: dict[str, Any]) -> str:
        return build_dir(props["runtime_dir"], props["build_key"])

    def apply(self, props: dict[str, Any], olds: dict[str, Any] | None) -> dict[str, Any]:
        folder = build_dir(props["runtime_dir"], props["build_key"])
        q = shlex.quote
        with Session(props["connection"]) as host:
            reused = host.run(f"test -f {q(folder)}/.complete", check=False).code == 0
            if not reused:
                subdir = self._fetch_source(host, props, folder)
                script = f"{folder}/build-llama-server.sh"
                flags = " ".join(q(f) for f in props["cmake_flags"])
                done = host.run(under_build_lock(folder, [
                    f"if [ -f {q(folder)}/.complete ]; then echo reused; exit 0; fi",
                    f"printf %s {q(props['build_script'])} > {q(script)} && chmod 755 {q(script)}",
                    f"{q(script)} {q(folder)} {q(subdir)} -- {flags} > {q(folder)}/build.log 2>&1"
                    f" || {{ tail -n 40 {q(folder)}/build.log; exit 1; }}",
                ]), check=False, timeout=float(props["timeout_seconds"]))
                if done.code != 0:  # the command holds the whole script: show its output only
                    raise RemoteError(f"building llama-server in {folder} on {host.where} failed"
                                      f" (exit {done.code}):\n{tail(done.stdout + done.stderr)}")
                reused = done.stdout.strip() == "reused"
            # `current` is what serve.sh runs: point it at this build.
            host.run(f"ln -sfn {q(folder)} {q(props['runtime_dir'])}/current.tmp"
                     f" && mv -T {q(props['runtime_dir'])}/current.tmp {q(props['runtime_dir'])}/current")
            version = host.run(f"cat {q(folder)}/version.txt").stdout.strip()
        return {**props, "bin_dir": f"{folder}/bin", "version": version, "reused": reused}

    def _fetch_source(self, host: Session, props: dict[str, Any], folder: str) -> str:
        """Puts the pinned source in <folder>/src unless the build there is complete; returns the
        llama.cpp subdir inside it."""
        q = shlex.quote
        source, src = props["source"], f"{folder}/src"
        if "git" in source:
            commit = q(source["commit"])
            fetch = [f"git clone --quiet --no-checkout {q(source['git'])} {q(src)}",
                     f"git -C {q(src)} checkout --quiet --detach {commit}",
                     f"head=$(git -C {q(src)} rev-parse HEAD)",
                     f'[ "$head" = {commit} ] || {{ echo "checked out $head, not the pinned commit"'
                     f" {commit}; exit 1; }}"]
            subdir = "."
        else:
            fetch = [f"tar -xf {q(self._stage_archive(host, props))} -C {q(src)}"]
            subdir = source["subdir"]
        host.run(under_build_lock(folder, [f"if [ -f {q(folder)}/.complete ]; then exit 0; fi",
                                           f"rm -rf {q(src)} && mkdir -p {q(src)}", *fetch]))
        return subdir

    def _stage_archive(self, host: Session, props: dict[str, Any]) -> str:
        """Puts the pinned llama.cpp archive, verified, in this host's <runtime>/sources."""
        q = shlex.quote
        source = props["source"]
        archive = f"{props['runtime_dir']}/sources/{source['sha256']}.archive"
        if host.run(f"echo {q(source['sha256'])}'  '{q(archive)} | sha256sum --check --status",
                    check=False).code != 0:
            if source["archive"].startswith(("http://", "https://")):
                host.run(f"mkdir -p {q(posixpath.dirname(archive))}"
                         f" && curl -fsSL -o {q(archive)}.part {q(source['archive'])}"
                         f" && mv {q(archive)}.part {q(archive)}")
            else:
                host.upload(source["archive"], archive)
            got = host.run(f"sha256sum {q(archive)}").stdout.split()[0]
            if got != source["sha256"]:
                host.run(f"rm -f {q(archive)}")
                raise RemoteError(f"llama.cpp archive {source['archive']} has sha256 {got},"
                                  f" not the pinned {source['sha256']}")
        return archive

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        folder = build_dir(props["runtime_dir"], props["build_key"])
        current = f"{props['runtime_dir']}/current"
        # Gone unless finished AND the one `current` points at (a host re-created from a fresh
        # root filesystem keeps the cached build but not the link): `up` then re-creates it,
        # reusing the finished build.
        with Session(props["connection"]) as host:
            complete = host.run(f"test -f {shlex.quote(folder)}/.complete && [ \"$(readlink"
                                f" {shlex.quote(current)})\" = {shlex.quote(folder)} ]",
                                check=False).code == 0
        return ReadResult(id_=id_ if complete else None, outs=props if complete else {})

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        # Keep the build (content-keyed cache); only stop pointing `current` at it.
        folder = build_dir(props["runtime_dir"], props["build_key"])
        current = f"{props['runtime_dir']}/current"
        with Session(props["connection"]) as host:
            host.run(f"[ \"$(readlink {shlex.quote(current)})\" != {shlex.quote(folder)} ]"
                     f" || rm -f {shlex.quote(current)}")


def _build_details(change: Change) -> list[str]:
    old, new = change.old, change.new
    lines = mapping_details(old.get("source") or {}, new.get("source") or {})
    old_flags, new_flags = old.get("cmake_flags") or [], new.get("cmake_flags") or []
    lines += [f"cmake flag removed: `{f}`" for f in old_flags if f not in new_flags]
    lines += [f"cmake flag added: `{f}`" for f in new_flags if f not in old_flags]
    # The script's text is too long to show; that it changed explains the new key.
    if old.get("build_script") != new.get("build_script"):
        lines.append("build-llama-server.sh changed")
    return lines + mapping_details({"build key": old.get("build_key")},
                                   {"build key": new.get("build_key")})


# A new build key is a new build (a new pin or new flags, see replaceReasons).
KIND = Kind.of(tokens.LLAMA_SERVER_BUILD, "llama-server build", CONFIG_ONLY, replace=REBUILD,
               details=updates_only(_build_details))

class LlamaServerBuild(HostResource, module=tokens.DYNAMIC_MODULE, name=tokens.LLAMA_SERVER_BUILD.name):
    build_key: pulumi.Output[str]
    bin_dir: pulumi.Output[str]
    version: pulumi.Output[str]
    reused: pulumi.Output[bool]

    def __init__(self, name: str, args: LlamaServerBuildArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        source = source_input(args.source)
        script = BUILD_SCRIPT.read_text()
        super().__init__(
            LlamaServerBuildProvider(),
            name,
            {
                "connection": args.connection,
                "runtime_dir": args.runtime_dir,
                "source": source,
                "cmake_flags": list(args.cmake_flags),
                "build_key": build_key(source, list(args.cmake_flags), script),
                "build_script": script,
                "timeout_seconds": args.timeout_seconds,
            },
            opts,
            outputs=("bin_dir", "version", "reused"),
        )
