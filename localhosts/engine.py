"""Drives the real Pulumi engine (the CLI) on a throwaway copy of the project, for the tests
and the benchmarks (localhosts/bench/bench_preview.py).

Each project gets its own file backend and stacks folder, so a run never touches the
repository's stacks or the developer's state. Results are read from the engine's JSON
(`--json` for preview and stack output, the event log for updates), not from log text.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from config.schema.vllm_fleet import SECRET_FORM
from spear.rules import EXAMPLE_PASSPHRASE
from config.types import AMBIENT
from localhosts.kube import kubebuild

REPO = Path(__file__).resolve().parents[1]
# The committed prod/dev placeholder secrets are encrypted with this passphrase (scripts/env.sh).
PROJECT_FILES = ("__main__.py", "config", "components", "review", "spear", "gate", "hosts",
                 "requirements.txt")


def upstream_source_env() -> dict[str, str]:
    """For a copy of the project elsewhere, which has no ../shared/upstream beside it: the
    sources this checkout's engine is built from (setup-engine.sh keys the engine by them, and
    would otherwise clone them from GitHub)."""
    shared = REPO.parent / "shared" / "upstream"
    if "SPEAR_UPSTREAM_SRC" in os.environ or not shared.is_dir():
        return {}
    return {"SPEAR_UPSTREAM_SRC": str(shared)}


def engine_env() -> dict[str, str]:
    """The environment scripts/env.sh sets up, engine on PATH (building it if needed)."""
    out = subprocess.run(
        ["bash", "-c", f"source {REPO}/scripts/env.sh >/dev/null && env -0"],
        check=True, capture_output=True, text=True,
    ).stdout
    return dict(item.split("=", 1) for item in out.split("\0") if "=" in item)


@dataclass
class Update:
    """What the engine reported for one `pulumi up/destroy/refresh`."""
    ok: bool
    output: str
    events: list[dict[str, Any]]

    def ops(self) -> dict[str, str]:
        """resource name -> operation the engine applied (create, update, replace, delete...).

        A replacement comes as several steps (create-replacement, replace, delete-replaced).
        """
        done = {}
        for event in self.events:
            step = event.get("resOutputsEvent", {}).get("metadata")
            if step and "::pulumi:providers:" not in step["urn"]:
                op = step["op"]
                done[step["urn"].rsplit("::", 1)[1]] = "replace" if "replace" in op else op
        return done

    def changes(self) -> dict[str, int]:
        """The engine's summary, op -> count, without reads and their discards on destroy: a
        fleet stack reads its own outputs (config/load.py::deployed_rollout) every time, which
        changes nothing (`pulumi up` prints no line for it either)."""
        for event in self.events:
            summary = event.get("summaryEvent")
            if summary:
                return {op: n for op, n in summary["resourceChanges"].items()
                        if op not in ("read", "discard")}
        return {}

    def policy_violations(self) -> list[dict[str, Any]]:
        return [e["policyEvent"] for e in self.events if "policyEvent" in e]

    def diagnostics(self) -> list[str]:
        return [e["diagnosticEvent"]["message"] for e in self.events if "diagnosticEvent" in e]


class Project:
    """A copy of the project in `workdir` with its own backend; `program` may replace __main__.py."""

    def __init__(self, workdir: Path, env: dict[str, str], program: str | None = None) -> None:
        self.dir = workdir / "project"
        self.state = workdir / "state"
        self.state.mkdir(parents=True)
        self.dir.mkdir()
        for name in PROJECT_FILES:
            src = REPO / name
            if src.is_dir():
                shutil.copytree(src, self.dir / name, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy(src, self.dir / name)
        (self.dir / "stacks").mkdir()
        project = yaml.safe_load((REPO / "Pulumi.yaml").read_text())
        project["runtime"]["options"]["virtualenv"] = str(REPO / ".venv")
        (self.dir / "Pulumi.yaml").write_text(yaml.safe_dump(project))
        if program is not None:
            (self.dir / "__main__.py").write_text(program)
        # PULUMI_DEBUG_COMMANDS enables --event-log, as the Automation API does.
        self.env = {**env, "PULUMI_BACKEND_URL": f"file://{self.state}",
                    "PULUMI_CONFIG_PASSPHRASE": "test-passphrase", "PULUMI_DEBUG_COMMANDS": "true"}

    def pulumi(self, *args: str, check: bool = True, timeout: float = 3600,
               stdin: str | None = None) -> subprocess.CompletedProcess:
        """`stdin`: what the command reads, e.g. `config set`'s value (never on the command line,
        where a failure would print it)."""
        result = subprocess.run(["pulumi", *args, "--non-interactive"], cwd=self.dir, env=self.env,
                                capture_output=True, text=True, timeout=timeout, input=stdin)
        if check and result.returncode != 0:
            raise AssertionError(f"pulumi {' '.join(args)} failed ({result.returncode}):\n"
                                 f"{result.stdout[-6000:]}\n{result.stderr[-3000:]}")
        return result

    def new_stack(self, name: str, config: dict[str, Any]) -> None:
        """Creates a stack whose config file holds `config` (keys without the project prefix)."""
        self.pulumi("stack", "init", name)
        path = self.dir / "stacks" / f"Pulumi.{name}.yaml"
        doc = (yaml.safe_load(path.read_text()) if path.exists() else None) or {}
        doc["config"] = {f"spear-fleet:{k}": v for k, v in config.items()}
        path.write_text(yaml.safe_dump(doc))

    def set_config(self, stack: str, path: str, value: str | int | bool) -> None:
        """`pulumi config set --path`, keeping the value's type."""
        kind = {bool: "bool", int: "int", str: "string"}[type(value)]
        text = str(value).lower() if isinstance(value, bool) else str(value)
        self.pulumi("config", "set", "--path", "--stack", stack, f"spear-fleet:{path}", text,
                    "--type", kind)

    def set_object(self, stack: str, path: str, values: dict[str, Any] | None) -> None:
        """Declare (or, with None, drop) the object at `path`, each value as text."""
        subprocess.run(["pulumi", "config", "rm", "--path", "--stack", stack,
                        f"spear-fleet:{path}", "--non-interactive"], cwd=self.dir, env=self.env,
                       capture_output=True)
        for name, value in (values or {}).items():
            self.set_config(stack, f"{path}.{name}", value)

    def preview(self, stack: str, *extra: str, check: bool = True) -> dict[str, Any]:
        result = self.pulumi("preview", "--stack", stack, "--json", *extra, check=False)
        if check and result.returncode != 0:
            raise AssertionError(f"preview failed:\n{result.stdout[-6000:]}\n{result.stderr[-3000:]}")
        return json.loads(result.stdout)

    def _with_events(self, command: str, stack: str, *extra: str) -> Update:
        log = self.state / f"events-{command}.jsonl"
        log.unlink(missing_ok=True)
        result = self.pulumi(command, "--stack", stack, "--yes", "--skip-preview",
                             "--event-log", str(log), *extra, check=False)
        if not log.exists():
            raise AssertionError(f"pulumi {command} wrote no event log:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
        events = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        return Update(result.returncode == 0, result.stdout + result.stderr, events)

    def up(self, stack: str, *extra: str) -> Update:
        return self._with_events("up", stack, *extra)

    def start_up(self, stack: str, *extra: str) -> subprocess.Popen:
        """`pulumi up` left running (in its own process group, for tests that kill it)."""
        return subprocess.Popen(["pulumi", "up", "--stack", stack, "--yes", "--skip-preview",
                                 "--non-interactive", *extra], cwd=self.dir, env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)

    def pending_operations(self, stack: str) -> list[dict[str, Any]]:
        """What the state says an interrupted update left in flight."""
        return json.loads(self.state_text(stack))["deployment"].get("pending_operations") or []

    def refresh(self, stack: str, *extra: str) -> Update:
        return self._with_events("refresh", stack, *extra)

    def destroy(self, stack: str, *extra: str) -> Update:
        return self._with_events("destroy", stack, *extra)

    def own_passphrase(self, stack: str, passphrase: str) -> None:
        """The stack's secrets re-encrypted under `passphrase` (a committed example's are under
        the public one, which deploys only the local stack: config/load.py), and the project's
        commands run with it from now on."""
        shown = json.loads(self.pulumi("config", "--stack", stack, "--show-secrets",
                                       "--json").stdout)
        secrets = {key: entry for key, entry in shown.items() if entry.get("secret")}
        path = self.dir / "stacks" / f"Pulumi.{stack}.yaml"
        doc = yaml.safe_load(path.read_text())
        doc.pop("encryptionsalt", None)
        for key in secrets:
            doc["config"].pop(key, None)
        path.write_text(yaml.safe_dump(doc))
        self.env["PULUMI_CONFIG_PASSPHRASE"] = passphrase
        for key, entry in secrets.items():
            values = entry.get("objectValue")
            if isinstance(values, dict):  # sshPrivateKeys: a map of secrets
                for name, text in values.items():
                    self.pulumi("config", "set", "--secret", "--path", "--stack", stack,
                                f"{key}.{name}", stdin=text)
            else:
                self.pulumi("config", "set", "--secret", "--stack", stack, key,
                            stdin=entry["value"])

    def outputs(self, stack: str) -> dict[str, Any]:
        return json.loads(self.pulumi("stack", "output", "--stack", stack, "--json",
                                      "--show-secrets").stdout)

    def state_text(self, stack: str) -> str:
        return self.pulumi("stack", "export", "--stack", stack).stdout

    def urn(self, stack: str, name: str) -> str:
        """The URN of the stack's resource named `name` (for `up --replace`)."""
        resources = json.loads(self.state_text(stack))["deployment"]["resources"]
        [urn] = [r["urn"] for r in resources if r["urn"].endswith(f"::{name}")]
        return urn


# The project's own program (as fleet_main.py) with the stack's inference hosts left out: the
# config needs one, and some scenarios are about the other things a stack declares.
_WITHOUT_INFERENCE_HOSTS = '''
import dataclasses
import runpy

import config.load

load_all = config.load.load


def load_without_inference_hosts():
    stack = load_all()
    return dataclasses.replace(stack, config=dataclasses.replace(stack.config, inference_hosts={}))


config.load.load = load_without_inference_hosts
runpy.run_path("fleet_main.py")
'''


def without_inference_hosts(workdir: Path, env: dict[str, str]) -> Project:
    """A project copy whose program leaves the stack's inference hosts out."""
    project = Project(workdir, env, program=_WITHOUT_INFERENCE_HOSTS)
    shutil.copy(REPO / "__main__.py", project.dir / "fleet_main.py")
    return project


# What a preview of a stack file runs with in place of an image this machine builds (a
# `{file: ...}` setting under agentSandbox: the local stack's seat and node guard images).
PREVIEW_IMAGES = {("seatImage",): "localhost/spear-fleet/seat:preview@sha256:" + "0" * 64,
                  ("nodeGuard", "image"): "localhost/spear-fleet/node-guard:preview@sha256:" + "0" * 64}


def built_here(sandbox: dict[str, Any]) -> dict[tuple[str, ...], str]:
    """The agentSandbox settings (paths) that name a file a build here writes, each with the
    pinned reference a preview runs with in its place."""
    def at(path: tuple[str, ...]) -> Any:
        node: Any = sandbox
        for step in path:
            node = node.get(step) if isinstance(node, dict) else None
        return node
    return {path: ref for path, ref in PREVIEW_IMAGES.items() if isinstance(at(path), dict)}


def repo_stack(workdir: Path, stack: str, cluster: Path | None = None) -> Project:
    """A project copy holding stacks/Pulumi.<stack>.yaml as committed, the stack created.

    A host that names an SSH key file gets a throwaway key instead, so the preview does not
    depend on this machine's hosts (preview needs the key's text, not a host). A stack that
    declares the vLLM fleet needs the kubernetes plugin: this waits for its build if it runs. A
    fleet that names a kubeconfig file (the local stack's cluster) gets `cluster`, the kubeconfig
    of the test session's cluster, instead: the preview then runs against a real API server on
    every machine, and never reads this machine's own local cluster. A seat image built here
    (seatImage.file, nodeGuard.image.file) is PREVIEW_IMAGES': the preview needs a pinned
    reference, not the image.
    """
    config = yaml.safe_load((REPO / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"]
    fleet = config.get("spear-fleet:vllmFleet")
    if fleet is not None:
        kubebuild.install_provider_plugin()
    names_file = fleet is not None and fleet.get("kubeconfig", AMBIENT) not in (AMBIENT, SECRET_FORM)
    if names_file and cluster is None:
        raise ValueError(f"the {stack} stack's fleet names a kubeconfig file: pass the session"
                         " cluster's (the kube_cluster fixture)")
    project = Project(workdir, engine_env())
    project.env["PULUMI_CONFIG_PASSPHRASE"] = EXAMPLE_PASSPHRASE
    stack_file = REPO / "stacks" / f"Pulumi.{stack}.yaml"
    shutil.copy(stack_file, project.dir / "stacks")
    project.pulumi("stack", "init", stack)
    hosts = {f"inferenceHosts.{name}": host
             for name, host in config["spear-fleet:inferenceHosts"].items()}
    if "spear-fleet:gateway" in config:
        hosts["gateway"] = config["spear-fleet:gateway"]
    for owner, host in hosts.items():
        if "privateKeyPath" in host.get("ssh", {}):
            key = workdir / f"id_ed25519_{owner.rsplit('.', 1)[-1]}"
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
            project.set_config(stack, f"{owner}.ssh.privateKeyPath", str(key))
    if names_file:
        project.set_config(stack, "vllmFleet.kubeconfig", str(cluster))
    # An image this machine builds (the local stack's) may not be built yet: the preview needs a
    # pinned reference, not the image.
    for path, ref in built_here((fleet or {}).get("agentSandbox", {})).items():
        project.set_config(stack, ".".join(("vllmFleet.agentSandbox", *path)), ref)
    return project
