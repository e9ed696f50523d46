"""The gateway image for real: its one layer unpacked and run with chroot as the `spear` user (uid
1000, as the Deployment runs it), which proves the layer holds everything the gateway needs: the
offline query engine under node, migrate.sh's commands against a real PostgreSQL, and LiteLLM's
proxy in database mode with its image config (Env, WorkingDir, Cmd), making a key through Prisma.
The chroot shares this machine's network, so the database and the proxy meet on loopback; it gets
/proc and /dev as a container does."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from components.gateway.database import MIGRATE_SH
from localhosts.images.gateway_image import build
from localhosts.servers.postgres import postgres_database

PROXY_PORT = 4190  # this test's range: 4190-4199
UNREACHABLE_UPSTREAM = 4199  # nothing listens there: no model is asked
MASTER_KEY = "sk-gateway-image-test"
READY_WITHIN = 240.0
USER = f"{build.UID}:{build.GID}"


@pytest.fixture(scope="module")
def image() -> build.Image:
    return build.ensure_image()


@pytest.fixture(scope="module")
def image_config(image) -> dict:
    return image.config()  # what containerd runs it with


@pytest.fixture(scope="module")
def rootfs(image, tmp_path_factory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("gateway-image") / "rootfs"
    root.mkdir()
    try:
        image.unpack(root)
        for mount_point in ("proc", "dev"):  # made by the runtime, as runc does
            (root / mount_point).mkdir()
        shutil.copy(MIGRATE_SH, root / "migrate.sh")
        yield root
    finally:
        shutil.rmtree(root)  # 900 MB


@pytest.fixture(scope="module")
def db():
    with postgres_database() as database:
        yield database


# What a container runtime gives a container, in a mount namespace of the chroot's own (private:
# the mounts go with its last process and never show on this machine, so none needs unmounting):
# /proc, and a /dev with the usual devices and /dev/fd, which bash's process substitution needs.
CONTAINER = r"""set -eu
userspec=$1 root=$2; shift 2
mount -t proc proc "$root/proc"
mount -t tmpfs -o mode=0755,nosuid tmpfs "$root/dev"
for device in null zero full random urandom; do
  touch "$root/dev/$device"
  mount --bind "/dev/$device" "$root/dev/$device"
done
ln -s /proc/self/fd "$root/dev/fd"
unset PWD  # the shell's own, not the container's
exec chroot --userspec="$userspec" "$root" "$@"
"""


def in_image(root: Path, argv: list[str], env: dict[str, str], **kwargs) -> subprocess.Popen:
    """argv in the chroot as the `spear` user with exactly `env` (what a container gets), in its
    own session so that stopping it reaches what it starts (the query engine)."""
    return subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", CONTAINER, "sh", USER,
         str(root), *argv], env=env, start_new_session=True, **kwargs)


def run_in_image(root: Path, argv: list[str], env: dict[str, str],
                 timeout: float = 120) -> subprocess.CompletedProcess:
    proc = in_image(root, argv, env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=timeout)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def base_env(image_config: dict) -> dict[str, str]:
    """The image's Env, and HOME as the Deployment sets it."""
    return {**dict(v.split("=", 1) for v in image_config["Env"]), "HOME": build.HOME}


def test_the_query_engine_answers_its_version_in_the_image(rootfs, image_config):
    done = run_in_image(rootfs, [build.QUERY_ENGINE, "--version"], base_env(image_config))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("query-engine "), done.stdout


@pytest.fixture(scope="module")
def migrated(rootfs, image_config, db) -> subprocess.CompletedProcess:
    """migrate.sh run as the migrations Job runs it (from the image, DATABASE_URL in env)."""
    env = {**base_env(image_config), "DATABASE_URL": db.url}
    return run_in_image(rootfs, ["bash", "/migrate.sh", "--venv", build.VENV], env)


def test_migrate_sh_applies_litellms_migrations_from_the_image(rootfs, migrated, db):
    assert migrated.returncode == 0, migrated.stderr
    venv = rootfs / os.readlink(rootfs / build.VENV.lstrip("/")).lstrip("/")
    migrations = list(venv.glob(
        "lib/python3.11/site-packages/litellm_proxy_extras/migrations/*/migration.sql"))
    assert migrations
    assert migrated.stdout.startswith(f"migrate: applied {len(migrations)}, skipped 0 in "), \
        migrated
    assert db.psql("SELECT count(*) FROM spear_applied_migrations") == str(len(migrations))
    assert db.psql("SELECT to_regclass('\"LiteLLM_VerificationToken\"') IS NOT NULL") == "t"


def request(method: str, path: str, body: dict | None = None, key: str | None = None) -> dict:
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    req = urllib.request.Request(f"http://127.0.0.1:{PROXY_PORT}{path}", method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers=headers)
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.load(resp)


@pytest.fixture(scope="module")
def proxy(rootfs, image_config, db, migrated, tmp_path_factory) -> Iterator[Path]:
    """The image's Cmd (and its WorkingDir, by env -C: the image has no shell) with a config
    and loopback, started in database mode on the migrated database; yields its log once it is
    alive."""
    assert migrated.returncode == 0, migrated.stderr
    (rootfs / "tmp/litellm.yaml").write_text(f"""model_list:
  - model_name: coder
    litellm_params:
      model: openai/coder
      api_base: http://127.0.0.1:{UNREACHABLE_UPSTREAM}/v1
      api_key: none
general_settings:
  master_key: os.environ/LITELLM_MASTER_KEY
""")
    env = {**base_env(image_config), "LITELLM_MASTER_KEY": MASTER_KEY, "DATABASE_URL": db.url}
    argv = ["/usr/bin/env", "-C", image_config["WorkingDir"], *image_config["Cmd"],
            "--config", "/tmp/litellm.yaml", "--host", "127.0.0.1", "--port", str(PROXY_PORT)]
    log = tmp_path_factory.mktemp("gateway-image-logs") / "litellm.log"
    with log.open("wb") as out:
        proc = in_image(rootfs, argv, env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + READY_WITHIN
        while True:
            if proc.poll() is not None:
                pytest.fail(f"litellm exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
            with contextlib.suppress(OSError):
                request("GET", build.LIVENESS_PATH)
                break
            if time.monotonic() > deadline:
                pytest.fail(f"litellm not alive after {READY_WITHIN:.0f} s:\n"
                            f"{log.read_text()[-4000:]}")
            time.sleep(1)
        yield log
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_the_proxy_in_the_image_makes_a_key_in_the_database_through_prisma(proxy, db):
    readiness = request("GET", build.READINESS_PATH)
    assert readiness["db"] == "connected", readiness
    with pytest.raises(urllib.error.HTTPError) as refused:
        request("POST", "/key/generate", {}, key="sk-not-the-master-key")
    assert refused.value.code in (400, 401)
    made = request("POST", "/key/generate", {"key_alias": "image-test"}, key=MASTER_KEY)
    assert made["key"].startswith("sk-")
    assert db.psql('SELECT key_alias FROM "LiteLLM_VerificationToken"') == "image-test"
    info = request("GET", f"/key/info?key={made['key']}", key=MASTER_KEY)
    assert info["info"]["key_alias"] == "image-test"
