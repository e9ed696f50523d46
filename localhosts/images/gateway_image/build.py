"""The gateway's image for the local cluster: `localhost/spear-fleet/litellm-gateway:<version>`,
LiteLLM's proxy in database mode (PostgreSQL through Prisma's WebAssembly query engine under
node), for a Deployment of the gateway on the local cluster's real node; its migrations run from
the same image in a Job (`bash /migrate/migrate.sh --venv /opt/litellm/venv`, migrate.sh from a
ConfigMap, DATABASE_URL in the environment).

One layer, taken from this machine (Debian 12, the node's release), with localhosts/images/image_files.py:
- python3.11 and its standard library, and the LiteLLM virtualenv install-litellm.sh built
  (localhosts/servers/litellm_venv.py) at its real path, since a virtualenv cannot be moved (its scripts'
  shebangs are absolute), with VENV linking to it; its interpreter links point at the image's
  python3.11 (the venv may have been made by another 3.11, pyenv's on a test machine);
- node and the prisma-offline bundle at BUNDLE_DIR (QUERY_ENGINE is its `#!/usr/bin/env node`);
- what migrate.sh and the backup's script run (MIGRATE_COMMANDS, PG_PROGRAMS: psql, pg_dump and
  pg_restore are PostgreSQL 15's binaries themselves, not Debian's
  perl wrapper) and what else is run (OTHER_COMMANDS);
- the shared libraries `ldd` lists for all of these and for the venv's extension modules (but
  the libraries the venv bundles, which are in it as files already).

Cached under `$SPEAR_CACHE/images/litellm-gateway-<key>/`. The key: the venv's own build key
(install-litellm.sh writes it to <build>/.complete), the bundle's content key (its folder's
name), and each other file's path, mode, size and mtime. Before the layer is written every module
of the venv is compiled, so it holds the same bytecode files whatever has run from the venv before
(the bytecode is kept: it saves the proxy's start most of its imports' compiling).

CLI: `python -m localhosts.images.gateway_image [VERSION]` prints the archive, ref and digest.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from config.schema.gateway import DEFAULT_LITELLM
from localhosts.images import image_files
from localhosts.images.image_files import PYTHON, Entries, Image, add_host_file
from localhosts.servers.litellm_venv import litellm_venv, offline_bundle_dir

REPOSITORY = "localhost/spear-fleet/litellm-gateway"
VERSION = DEFAULT_LITELLM  # 1.91.1, the cookbook's pin and the local stack's LiteLLM
# Bump when the image's recipe changes, so cached layers are rebuilt.
RECIPE_VERSION = 1
VENV = "/opt/litellm/venv"  # a symlink to the venv's real folder
PROXY = f"{VENV}/bin/litellm"
BUNDLE_DIR = "/opt/prisma-offline"
QUERY_ENGINE = f"{BUNDLE_DIR}/query-engine"
PORT = 4000
# For a Deployment: run as the image's `spear` user, HOME in the sticky /tmp (nothing else in
# the layer is writable by it), the config from a ConfigMap at CONFIG_PATH (`--config`), probes
# on LiteLLM's health paths (neither needs a key).
UID, GID = image_files.UID, image_files.GID
HOME = WORKING_DIR = "/tmp"
CONFIG_PATH = "/etc/litellm/config.yaml"
LIVENESS_PATH = "/health/liveliness"
READINESS_PATH = "/health/readiness"
# The migrations Job: migrate.sh mounted at MIGRATE_DIR, DATABASE_URL in its environment.
MIGRATE_DIR = "/migrate"
MIGRATE_COMMAND = ("bash", f"{MIGRATE_DIR}/migrate.sh", "--venv", VENV)
NODE = "/usr/bin/node"
# The in-cluster backup's (hosts/gateway/backup-database.sh from the CronJob, a restore's Job):
# PostgreSQL 15's own binaries, at /usr/bin, as psql.
PG_PROGRAMS = tuple(f"/usr/lib/postgresql/15/bin/{name}" for name in ("psql", "pg_dump",
                                                                      "pg_restore"))
# What hosts/gateway/migrate.sh runs (tests/unit/test_gateway_image.py finds each in it).
MIGRATE_COMMANDS = ("bash", "python3", "psql", "date", "grep", "sha256sum", "find", "sort")
# And what else runs: env for the `#!/usr/bin/env` shebangs (the query engine's, migrate.sh's);
# cat and openssl for prisma-client-py's platform check before it starts the engine
# (`cat /etc/os-release`, `openssl version`); sleep for a Job that waits for its database.
OTHER_COMMANDS = ("env", "cat", "openssl", "sleep",
                  # and what the backup's script runs besides (openssl encrypts each dump).
                  "sh", "mv", "rm", "mkdir", "mktemp")
ENV = {
    "PATH": image_files.PATH_ENV.removeprefix("PATH="),  # never VENV/bin: see image_config
    "PRISMA_QUERY_ENGINE_BINARY": QUERY_ENGINE,
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no fetch of the cost map from GitHub at start
    "DISABLE_SCHEMA_UPDATE": "true",  # no schema engine offline: migrate.sh applies migrations
    "PRISMA_HIDE_UPDATE_MESSAGE": "true",
}
CMD = (PROXY, "--port", str(PORT))
# prisma-client-py reaches its query engine at http://localhost:<port>: names resolve by files
# first, and localhost is in /etc/hosts (the kubelet mounts a hosts file of its own over it).
HOSTS = b"127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
NSSWITCH = b"passwd: files\ngroup: files\nhosts: files dns\n"


# ---------------------------------------------------------------------------------------------
# What goes in


def venv_interpreter(venv: str, config: str) -> Entries:
    """The venv's python3 link and pyvenv.cfg for the image's python3.11, whatever 3.11 made the
    venv (`config`: its pyvenv.cfg); the packages are built for any CPython 3.11."""
    values = dict(line.split(" = ", 1) for line in config.splitlines() if " = " in line)
    if not values.get("version", "").startswith("3.11."):
        raise RuntimeError(f"{venv}: made by Python {values.get('version')}, the image has 3.11")
    cfg = (f"home = {os.path.dirname(PYTHON)}\ninclude-system-site-packages = false\n"
           f"version = {values['version']}\nexecutable = {PYTHON}\n")
    return {f"{venv}/bin/python3": ("symlink", PYTHON),
            f"{venv}/pyvenv.cfg": ("data", cfg.encode(), 0o644)}


def command_path(name: str) -> str:
    """Where a command is on this machine (Debian's merged /usr: all in /usr/bin)."""
    path = f"/usr/bin/{name}"
    if not os.path.exists(path):
        raise RuntimeError(f"{path} is missing: the gateway image needs {name}")
    return path


def image_entries(venv: Path, bundle: Path) -> Entries:
    """Everything the layer holds: `venv` a LiteLLM virtualenv (its real folder goes in),
    `bundle` the unpacked prisma-offline bundle."""
    real_venv = os.path.realpath(venv)
    entries: Entries = {}
    elves = image_files.add_python(entries)
    elves += image_files.add_tree(real_venv, entries)
    entries.update(venv_interpreter(real_venv, Path(real_venv, "pyvenv.cfg").read_text()))
    entries[VENV] = ("symlink", real_venv)
    elves += image_files.add_tree(str(bundle), entries, at=BUNDLE_DIR)
    add_host_file(NODE, entries)
    for program in PG_PROGRAMS:
        add_host_file(program, entries, at=f"/usr/bin/{os.path.basename(program)}")
    elves += [NODE, *PG_PROGRAMS]
    for name in sorted({*MIGRATE_COMMANDS, *OTHER_COMMANDS} - {"python3", "psql"}):
        path = command_path(name)
        add_host_file(path, entries)
        elves.append(os.path.realpath(path))
    image_files.add_libraries(elves, entries, own=[real_venv])  # the venv's own are in it
    add_host_file("/etc/os-release", entries)  # prisma-client-py reads it (cat, above)
    entries["/etc/hosts"] = ("data", HOSTS, 0o644)
    entries["/etc/nsswitch.conf"] = ("data", NSSWITCH, 0o644)
    entries["/home/spear"] = ("dir", 0o755)
    image_files.finish(entries)
    # The `spear` user must reach the venv: every folder above it may be passed through (/root
    # is 0700 otherwise).
    for parent in map(str, Path(real_venv).parents):
        if parent != "/":
            entries[parent] = ("dir", entries[parent][1] | 0o111)
    return entries


def compile_bytecode(venv: Path) -> None:
    """Compiles what no import has yet (prisma generate's client, modules never imported), so
    the layer's files do not depend on what has run from the venv. A fixed hash seed, and no
    SOURCE_DATE_EPOCH (with it compileall writes hash-checked files instead of timestamped
    ones). Some packages ship files that do not compile (templates, Python 2 examples): the
    same ones each time, so its exit status is not an error."""
    env = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}
    subprocess.run([PYTHON, "-m", "compileall", "-qq", "-j", "0", os.path.realpath(venv)],
                   env={**env, "PYTHONHASHSEED": "0"}, check=False)


def venv_build_key(venv: Path) -> str:
    """install-litellm.sh's key of the build the venv links to, which it writes last."""
    key = (Path(os.path.realpath(venv)) / ".complete").read_text().strip()
    if not key:
        raise RuntimeError(f"{venv}: the build is not complete")
    return key


def image_config() -> dict:
    # The venv's bin is not on PATH: with `prisma` on PATH LiteLLM would run `prisma migrate
    # diff` at start, which needs the schema engine (there is none offline).
    return {"Env": [f"{k}={v}" for k, v in ENV.items()], "Cmd": list(CMD),
            "WorkingDir": WORKING_DIR}


def image_key(venv: Path, bundle: Path) -> str:
    """The layer's content key: the venv and the bundle by their own keys, the rest by file."""
    return image_files.content_key(
        image_entries(venv, bundle), RECIPE_VERSION,
        keyed={os.path.realpath(venv): venv_build_key(venv), BUNDLE_DIR: bundle.name})


def ensure_image(version: str = VERSION) -> Image:
    """The image archive naming it `REPOSITORY:<version>` (LiteLLM's version), built once per
    content; builds the venv and the bundle first if they are not cached."""
    venv, bundle = litellm_venv(version).path, offline_bundle_dir()

    def layer_entries() -> Entries:
        compile_bytecode(venv)
        return image_entries(venv, bundle)

    return image_files.cached_image(
        f"litellm-gateway-{image_key(venv, bundle)}", (f"{REPOSITORY}:{version}",), version,
        layer_entries, image_config(),
        history=f"localhosts/images/gateway_image/build.py r{RECIPE_VERSION}")
