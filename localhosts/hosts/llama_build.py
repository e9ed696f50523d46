"""The local stack's llama-server, built on this machine outside any host: for the serving image
and for tests that serve a model without a host.

Built with the same script, into the same content-keyed folder and under the same lock that the
local hosts mount as `<runtime>/builds` (localhosts/local_stack.py), so whichever builds first,
the host or this, the other waits for it and reuses it. `python -m localhosts.hosts.llama_build` builds it
if needed and prints its path (scripts/test runs it in the background, beside the tests).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import yaml

from components.cache import cache_dir
from components.inference_host.llama_server_build import BUILD_SCRIPT, build_key, source_input
from config.checker import NAMESPACE
from config.schema import parse
from localhosts.hosts import llama_source

LOCAL_STACK = Path(__file__).resolve().parents[2] / "stacks" / "Pulumi.local.yaml"


def local_stack_llama_server() -> Path:
    """The path of llama-server built as the local stack's `local` host builds it."""
    config = yaml.safe_load(LOCAL_STACK.read_text())["config"]
    hosts = config[f"{NAMESPACE}:inferenceHosts"]
    cfg = parse({"inferenceHosts": hosts}).inference_hosts["local"].llama_cpp
    source = source_input(cfg.source)
    folder = cache_dir() / "llama-builds" / build_key(source, list(cfg.cmake_flags))
    for shared in ("llama-builds", "ccache"):  # what the hosts mount (local_stack.host_binds)
        (cache_dir() / shared).mkdir(parents=True, exist_ok=True)
    # The lock the hosts' build takes (LlamaServerBuild's under_build_lock), from the check on.
    with open(f"{folder}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (folder / ".complete").exists():
            print(f"spear-fleet: the local stack's llama-server: cached ({folder})", file=sys.stderr)
        else:
            print("spear-fleet: the local stack's llama-server: building (first time only)",
                  file=sys.stderr, flush=True)
            archive = llama_source.ensure_source_archive()
            shutil.rmtree(folder / "src", ignore_errors=True)
            with tarfile.open(archive.path) as tar:
                tar.extractall(folder / "src", filter="tar")
            env = {**os.environ, "CCACHE_DIR": str(cache_dir() / "ccache")}
            subprocess.run(["bash", str(BUILD_SCRIPT), str(folder), archive.subdir, "--",
                            *cfg.cmake_flags], check=True, env=env)
    return folder / "bin" / "llama-server"


if __name__ == "__main__":
    print(local_stack_llama_server())
