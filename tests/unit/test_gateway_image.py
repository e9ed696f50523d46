"""The gateway image's contents (localhosts/images/gateway_image/build.py) on a small venv and bundle made
here in a cache of their own, with this machine's python3.11, node, psql and commands: the venv
at its real path and linked from /opt/litellm/venv, run by the image's python; node and the
bundle's query engine; what migrate.sh runs; the libraries of all of it; the config's PATH
without the venv's bin; no other cache path; and a key that follows the venv's build key."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from components.gateway.database import MIGRATE_SH
from localhosts.images import image_files
from localhosts.images.gateway_image import build

pytestmark = pytest.mark.skipif(
    not all(os.path.exists(p) for p in (build.NODE, *build.PG_PROGRAMS, image_files.PYTHON)),
    reason="needs this machine's node, PostgreSQL 15's programs and python3.11")

EXTENSION = "ext/_speedups.cpython-311-x86_64-linux-gnu.so"


class Fake:
    """A venv build as install-litellm.sh leaves one (made by pyenv's 3.11.7, with a bundled
    library and an extension module), the link to it, and an unpacked bundle."""

    def __init__(self, cache: Path) -> None:
        self.build = cache / "litellm" / "venv-9.9.9.builds" / "0123456789abcdef"
        site = self.build / "lib/python3.11/site-packages"
        (site / "litellm/__pycache__").mkdir(parents=True)
        (site / "litellm/__init__.py").write_text("VERSION = '9.9.9'\n")
        (site / "litellm/__pycache__/__init__.cpython-311.pyc").write_bytes(b"pyc")
        (site / "ext.libs").mkdir()
        (site / "ext").mkdir()
        # Any ELF shared object will do for ldd: one of the standard library's.
        shutil.copy(f"{image_files.STDLIB}/lib-dynload/_json.cpython-311-x86_64-linux-gnu.so",
                    site / EXTENSION)
        self.extension = str(site / EXTENSION)
        self.bundled = site / "ext.libs/libinner-1a2b3c.so.1"
        shutil.copy(site / EXTENSION, self.bundled)
        (self.build / "bin").mkdir()
        os.symlink("/root/.pyenv/versions/3.11.7/bin/python3", self.build / "bin/python3")
        os.symlink("python3", self.build / "bin/python")
        (self.build / "bin/litellm").write_text(f"#!{self.build}/bin/python3\n")
        (self.build / "bin/litellm").chmod(0o755)
        os.symlink("lib", self.build / "lib64")
        (self.build / "pyvenv.cfg").write_text(
            "home = /root/.pyenv/versions/3.11.7/bin\ninclude-system-site-packages = false\n"
            "version = 3.11.7\nexecutable = /root/.pyenv/versions/3.11.7/bin/python3.11\n")
        (self.build / ".complete").write_text("0123456789abcdef\n")
        self.venv = cache / "litellm" / "venv-9.9.9"
        os.symlink(self.build, self.venv)
        self.bundle = cache / "prisma-offline" / "62a483e78ce8a2b0"
        (self.bundle / "node_modules/prisma/build").mkdir(parents=True)
        (self.bundle / "node_modules/prisma/build/index.js").write_text("")
        (self.bundle / "node_modules/.bin").mkdir()
        os.symlink("../prisma/build/index.js", self.bundle / "node_modules/.bin/prisma")
        (self.bundle / "query-engine").write_text("#!/usr/bin/env node\n")
        (self.bundle / "query-engine").chmod(0o755)

    def entries(self) -> image_files.Entries:
        return build.image_entries(self.venv, self.bundle)


@pytest.fixture
def fake(tmp_path, monkeypatch) -> Fake:
    cache = tmp_path / "cache"
    monkeypatch.setenv("SPEAR_CACHE", str(cache))
    return Fake(cache)


def test_the_venv_is_at_its_real_path_with_its_bytecode_and_linked_from_opt_litellm_venv(fake):
    entries = fake.entries()
    real = str(fake.build)
    assert entries[build.VENV] == ("symlink", real)
    assert entries[f"{real}/bin/litellm"] == ("file", f"{real}/bin/litellm", 0o755)
    pyc = f"{real}/lib/python3.11/site-packages/litellm/__pycache__/__init__.cpython-311.pyc"
    assert entries[pyc][0] == "file"
    assert entries[f"{real}/lib64"] == ("symlink", "lib")
    assert entries[f"{real}/.complete"][0] == "file"
    assert build.PROXY == f"{build.VENV}/bin/litellm" and build.CMD[0] == build.PROXY


def test_the_venvs_python_is_the_images_python3_11_whatever_3_11_made_it(fake):
    entries = fake.entries()
    real = str(fake.build)
    assert entries[f"{real}/bin/python3"] == ("symlink", image_files.PYTHON)
    assert entries[f"{real}/bin/python"] == ("symlink", "python3")
    kind, cfg, mode = entries[f"{real}/pyvenv.cfg"]
    assert kind == "data" and b"home = /usr/bin\n" in cfg and b"/root/.pyenv" not in cfg
    assert entries[image_files.PYTHON] == ("file", image_files.PYTHON, 0o755)
    assert f"{image_files.STDLIB}/json/__init__.py" in entries
    with pytest.raises(RuntimeError, match="made by Python 3.12.1"):
        build.venv_interpreter(real, "home = /usr/bin\nversion = 3.12.1\n")


def test_node_and_the_bundles_query_engine_are_in_with_env_for_its_shebang(fake):
    entries = fake.entries()
    assert entries[build.NODE] == ("file", build.NODE, os.stat(build.NODE).st_mode & 0o7777)
    assert build.QUERY_ENGINE == "/opt/prisma-offline/query-engine"
    assert entries[build.QUERY_ENGINE] == ("file", str(fake.bundle / "query-engine"), 0o755)
    assert entries["/opt/prisma-offline/node_modules/.bin/prisma"] == (
        "symlink", "../prisma/build/index.js")
    assert entries["/usr/bin/env"][0] == "file"
    assert build.ENV["PRISMA_QUERY_ENGINE_BINARY"] == build.QUERY_ENGINE


def test_psql_is_postgresql_15s_binary_not_debians_perl_wrapper(fake):
    kind, host_path, _ = fake.entries()["/usr/bin/psql"]
    assert (kind, host_path) == ("file", "/usr/lib/postgresql/15/bin/psql")
    with open(host_path, "rb") as handle:
        assert handle.read(4) == b"\x7fELF"


def test_every_command_migrate_sh_runs_is_named_in_migrate_sh_and_is_in_the_image(fake):
    script = "\n".join(line for line in MIGRATE_SH.read_text().splitlines()
                       if not line.lstrip().startswith("#") or line.startswith("#!"))
    entries = fake.entries()
    for command in build.MIGRATE_COMMANDS:
        assert re.search(rf"(^|[\s($|/]){re.escape(command)}(\s|$)", script, re.M), command
        assert f"/usr/bin/{command}" in entries, command
    for command in build.OTHER_COMMANDS:
        assert f"/usr/bin/{command}" in entries, command


def test_the_host_libraries_of_everything_that_runs_are_in_and_the_venvs_own_are_its_files(
        fake, monkeypatch):
    host_only = fake.build.parent.parent / "libspear-host-only.so.1"  # outside the venv
    shutil.copy(fake.extension, host_only)
    ldd = image_files.shared_libraries

    def shared_libraries(binary):
        if binary == fake.extension:
            return [*ldd(binary), str(host_only), str(fake.bundled)]
        return ldd(binary)

    monkeypatch.setattr(image_files, "shared_libraries", shared_libraries)
    entries = fake.entries()
    assert entries[str(host_only)][0] == "file"
    for binary in (image_files.PYTHON, build.NODE, *build.PG_PROGRAMS, "/usr/bin/bash",
                   "/usr/bin/grep", fake.extension):
        for library in ldd(binary):
            assert entries[os.path.realpath(library)][0] == "file", (binary, library)
    # The bundled library is the venv's own file, at its own path.
    assert entries[str(fake.bundled)] == ("file", str(fake.bundled), 0o644)


def test_the_venvs_bin_is_not_on_the_images_path(fake):
    config = build.image_config()
    env = dict(item.split("=", 1) for item in config["Env"])
    path = env["PATH"].split(":")
    assert "/usr/bin" in path
    for folder in path:
        for venv in (build.VENV, str(fake.build)):
            assert not (folder == venv or folder.startswith(f"{venv}/")), folder
    assert env == {"PATH": env["PATH"],
                   "PRISMA_QUERY_ENGINE_BINARY": "/opt/prisma-offline/query-engine",
                   "LITELLM_LOCAL_MODEL_COST_MAP": "True", "DISABLE_SCHEMA_UPDATE": "true",
                   "PRISMA_HIDE_UPDATE_MESSAGE": "true"}
    assert config["Cmd"] == ["/opt/litellm/venv/bin/litellm", "--port", "4000"]
    assert config["WorkingDir"] == "/tmp"


def test_no_cache_path_but_the_venvs_own_folder_is_in_the_image(fake):
    cache = str(image_files.cache_dir())
    real = str(fake.build)
    above = {str(p) for p in fake.build.parents}
    for path, entry in fake.entries().items():
        if path.startswith(cache):
            assert path in above or path == real or path.startswith(f"{real}/"), path
        if entry[0] == "symlink" and entry[1].startswith(cache):
            assert entry[1] == real, (path, entry)
    assert not any(p.startswith(str(fake.bundle)) for p in fake.entries())


def test_the_spear_user_can_reach_the_venv_and_write_only_tmp(fake, monkeypatch):
    finish = image_files.finish

    def finish_with_a_private_folder(entries):  # as /root is, above the venv in $SPEAR_CACHE
        finish(entries)
        entries[str(fake.build.parent.parent)] = ("dir", 0o700)

    monkeypatch.setattr(image_files, "finish", finish_with_a_private_folder)
    entries = fake.entries()
    for parent in map(str, fake.build.parents):
        if parent != "/":
            assert entries[parent][0] == "dir" and entries[parent][1] & 0o001, parent
    assert entries["/tmp"] == ("dir", 0o1777)
    assert b"spear:x:1000:1000:" in entries["/etc/passwd"][1]
    assert (build.UID, build.GID, build.HOME) == (1000, 1000, "/tmp")
    assert b"localhost" in entries["/etc/hosts"][1]


def test_the_key_follows_the_venvs_build_key_and_not_bytecode_an_import_writes(fake):
    key = build.image_key(fake.venv, fake.bundle)
    assert build.image_key(fake.venv, fake.bundle) == key
    (fake.build / "lib/python3.11/site-packages/litellm/__pycache__/more.cpython-311.pyc"
     ).write_bytes(b"pyc")
    assert build.image_key(fake.venv, fake.bundle) == key
    (fake.build / ".complete").write_text("fedcba9876543210\n")
    assert build.image_key(fake.venv, fake.bundle) != key


def test_a_new_bundle_makes_a_new_key(fake):
    key = build.image_key(fake.venv, fake.bundle)
    other = fake.bundle.with_name("0000000000000000")
    shutil.copytree(fake.bundle, other, symlinks=True)
    assert build.image_key(fake.venv, other) != key


def test_compiling_the_venv_writes_the_bytecode_no_import_wrote(fake):
    module = fake.build / "lib/python3.11/site-packages/litellm/client.py"
    module.write_text("ANSWER = 42\n")
    build.compile_bytecode(fake.venv)
    assert (module.parent / "__pycache__/client.cpython-311.pyc").exists()
