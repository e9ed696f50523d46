"""The local stack's llama-server on this machine, for tests that serve a model without a host.

Built with the same script, into the same content-keyed folder and under the same lock that the
local hosts mount as `<runtime>/builds` (localhosts/local_stack.py), so whichever builds first,
the host or this, the other waits for it and reuses it.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

from components.inference_host.llama_server_build import BUILD_SCRIPT, build_key, source_input
from config.schema import parse
from localhosts import llama_source, local_stack
from spear.cache import cache_dir
from tests.support.stack_files import stack_raw


def local_stack_llama_server() -> Path:
    cfg = parse(stack_raw("local")).inference_hosts["local"].llama_cpp
    source = source_input(cfg.source)
    folder = cache_dir() / "llama-builds" / build_key(source, list(cfg.cmake_flags))
    local_stack.host_binds()  # creates the shared cache folders
    # The lock the hosts' build takes (LlamaServerBuild's under_build_lock), from the check on.
    with open(f"{folder}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / ".complete").exists():
            archive = llama_source.ensure_source_archive()
            shutil.rmtree(folder / "src", ignore_errors=True)
            with tarfile.open(archive.path) as tar:
                tar.extractall(folder / "src", filter="tar")
            env = {**os.environ, "CCACHE_DIR": str(cache_dir() / "ccache")}
            subprocess.run(["bash", str(BUILD_SCRIPT), str(folder), archive.subdir, "--",
                            *cfg.cmake_flags], check=True, env=env)
    return folder / "bin" / "llama-server"
