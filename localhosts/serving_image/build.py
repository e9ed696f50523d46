"""The local stack's serving image: `localhost/spear-fleet/vllm-standin:<tag>`, the stand-in for
vllm/vllm-openai on the local cluster's real node, which has no GPU to run vLLM on.

One layer, taken from this machine (Debian 12, the node's release): python3.11 and its standard
library, the shared libraries `ldd` lists for python, its extension modules and llama-server,
the local stack's llama-server (with the .so files it builds next to it, found through its RPATH
$ORIGIN), the tiny models, and the vllm stand-in (vllm_standin.py) as /usr/local/bin/vllm with
its config, which maps each model id the fleet may ask for to a gguf and llama-server flags.

Written as an OCI image layout tar by localhosts/oci.py, one name per tag. Cached under
`$SPEAR_CACHE/images/`, keyed on what goes in (each file's image path, mode, size and mtime: the
llama build and the models sit in content-keyed files already); the layer is built once per key
and every set of tags gets its archive from it.

CLI: `python -m localhosts.serving_image [TAG ...]` prints the archive, refs and digest.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from localhosts import oci, tiny_model
from localhosts.llama_build import local_stack_llama_server
from spear.cache import build_once, cache_dir

REPOSITORY = "localhost/spear-fleet/vllm-standin"
TAG = "v0.24.0"  # the local stack's pair tag
# The engine versions the image answers as on the local cluster: the local stack's, and the
# canary and promotion pairs the tests roll out (the same stand-in under each name).
TAGS = (TAG, "v0.25.0", "v0.26.0")
# Bump when the image's recipe changes, so cached layers are rebuilt.
RECIPE_VERSION = 1
STANDIN = Path(__file__).resolve().parent / "vllm_standin.py"
PYTHON = "/usr/bin/python3.11"
STDLIB = "/usr/lib/python3.11"
# Not needed to run the stand-in: tests, GUIs, pip's bootstrap, the static library, packages.
STDLIB_LEFT_OUT = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3",
                   "config-3.11-x86_64-linux-gnu", "site-packages", "dist-packages"}
LLAMA_DIR = "/opt/llama/bin"  # llama-server and its libraries together, for its RPATH $ORIGIN
MODELS_DIR = "/opt/vllm-standin/models"
CONFIG_PATH = "/etc/vllm-standin.json"
# The local stack's stable model (the smoke model), and a canary's model whose template knows no
# tools, so its tool-call markup stays in the text: the parser trap, which endpoint verification
# names parser-not-configured. It is the tiny model that says the markup to every prompt: the smoke
# model under chatml would answer the tools prompt with its plain text (no-tool-call).
STABLE_MODEL = "Qwen/Qwen3-Coder-Next-FP8"
NO_TOOL_TEMPLATE_MODEL = "spear-fleet/tiny-no-tool-template"
# What the tiny models are given at most, whatever --max-model-len says (their KV cache is
# 512 bytes a token; the tools prompt is about 200 tokens, in each of the 2 slots).
MAX_CTX = 4096
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class Image:
    refs: tuple[str, ...]  # every name the archive gives the image
    archive: Path
    digest: str  # the manifest's, "sha256:..."

    @property
    def ref(self) -> str:
        return self.refs[0]


# ---------------------------------------------------------------------------------------------
# What goes in (localhosts/oci.py's Entries)

Entries = oci.Entries


def _add_symlinks(path: str, entries: Entries) -> str:
    """Adds each symlink on the way to host path `path` (as Debian's merged /usr has /lib ->
    usr/lib); returns the real path they lead to."""
    current = "/"
    parts = Path(path).parts[1:]
    for i, part in enumerate(parts):
        candidate = os.path.join(current, part)
        if os.path.islink(candidate):
            target = os.readlink(candidate)
            entries[candidate] = ("symlink", target)
            resolved = os.path.normpath(os.path.join(current, target))
            return _add_symlinks(os.path.join(resolved, *parts[i + 1:]), entries)
        current = candidate
    return current


def add_host_file(path: str, entries: Entries, at: str | None = None) -> None:
    """The host file `path` at the same path in the image, with its symlinks, or at `at`."""
    real = os.path.realpath(path) if at else _add_symlinks(path, entries)
    entries[at or real] = ("file", real, os.stat(real).st_mode & 0o7777)


def shared_libraries(binary: str) -> list[str]:
    """What `ldd` says `binary` loads (the dynamic loader included), as host paths."""
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    if "not found" in out:
        raise RuntimeError(f"ldd {binary}: a library is missing:\n{out}")
    return [word for line in out.splitlines() for word in line.split()
            if word.startswith("/")]


def _stdlib(entries: Entries) -> list[str]:
    """The standard library's files into entries; returns its extension modules."""
    extensions = []
    for folder, dirs, files in os.walk(STDLIB):
        if folder == STDLIB:
            dirs[:] = [d for d in dirs if d not in STDLIB_LEFT_OUT]
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(folder, name)
            if os.path.islink(path):
                entries[path] = ("symlink", os.readlink(path))
                if os.path.isabs(os.readlink(path)):  # Debian's sitecustomize.py in /etc
                    add_host_file(os.path.realpath(path), entries)
            else:
                entries[path] = ("file", path, os.stat(path).st_mode & 0o7777)
                if name.endswith(".so"):
                    extensions.append(path)
    return extensions


def standin_config(models: dict[str, Path]) -> dict:
    """/etc/vllm-standin.json: llama-server, and each model id's gguf (by its file name in
    MODELS_DIR) and flags."""
    smoke = f"{MODELS_DIR}/{models['smoke'].name}"
    return {
        "llama_server": f"{LLAMA_DIR}/llama-server",
        "host": "0.0.0.0",
        "models": {
            STABLE_MODEL: {"gguf": smoke, "flags": [], "max_ctx": MAX_CTX},
            # chatml: a template without tools, so llama-server extracts no tool call.
            NO_TOOL_TEMPLATE_MODEL: {"gguf": f"{MODELS_DIR}/{models['no_tool_template'].name}",
                                     "flags": ["--chat-template", "chatml"], "max_ctx": MAX_CTX},
        },
    }


def image_entries() -> Entries:
    """Everything the layer holds."""
    llama_server = local_stack_llama_server()
    models = {"smoke": tiny_model.ensure_model(tiny_model.SMOKE_ANSWER),
              "no_tool_template": tiny_model.ensure_model(tiny_model.TOOL_CALL_ANSWER)}
    entries: Entries = {}
    elves = [PYTHON, *_stdlib(entries)]
    add_host_file(PYTHON, entries)
    entries["/usr/bin/python3"] = ("symlink", "python3.11")
    llama_files = sorted(p for p in llama_server.parent.iterdir()
                         if p.name == "llama-server" or ".so" in p.name)
    for path in llama_files:
        if path.is_symlink():  # libllama.so -> libllama.so.0 and the like, all in one folder
            entries[f"{LLAMA_DIR}/{path.name}"] = ("symlink", os.readlink(path))
        else:
            add_host_file(str(path), entries, at=f"{LLAMA_DIR}/{path.name}")
            elves.append(str(path))
    libraries = {lib for elf in elves for lib in shared_libraries(elf)
                 if not lib.startswith(f"{llama_server.parent}/")}  # its own, added above
    for library in sorted(libraries):
        add_host_file(library, entries)
    for path in {str(p) for p in models.values()}:
        add_host_file(path, entries, at=f"{MODELS_DIR}/{Path(path).name}")
    entries["/usr/local/bin/vllm"] = ("file", str(STANDIN), 0o755)
    entries[CONFIG_PATH] = ("data", json.dumps(standin_config(models), indent=2).encode(), 0o644)
    entries["/etc/passwd"] = ("data", b"root:x:0:0:root:/root:/bin/sh\n"
                              b"spear:x:1000:1000:spear:/home/spear:/bin/sh\n", 0o644)
    entries["/etc/group"] = ("data", b"root:x:0:\nspear:x:1000:\n", 0o644)
    entries["/tmp"] = ("dir", 0o1777)
    entries["/root"] = ("dir", 0o700)
    for path in list(entries):  # every parent folder
        for parent in Path(path).parents:
            if str(parent) != "/" and str(parent) not in entries:
                entries[str(parent)] = ("dir", 0o755)
    return entries


def content_key(entries: Entries) -> str:
    material = [RECIPE_VERSION]
    for path, entry in sorted(entries.items()):
        if entry[0] == "file":
            st = os.stat(entry[1])
            material.append([path, entry[2], st.st_size, st.st_mtime_ns])
        elif entry[0] == "data":
            material.append([path, entry[2], hashlib.sha256(entry[1]).hexdigest()])
        else:
            material.append([path, *entry])
    return hashlib.sha256(json.dumps(material).encode()).hexdigest()[:16]


def image_config() -> dict:
    return {"Env": [PATH_ENV], "Cmd": ["vllm", "serve"], "WorkingDir": "/"}


def ensure_image(tags: tuple[str, ...] = TAGS) -> Image:
    """The image archive naming it `REPOSITORY:<tag>` for each of `tags`, built once per content
    and tags."""
    if not tags:
        raise ValueError("an image needs at least one tag")
    refs = tuple(f"{REPOSITORY}:{tag}" for tag in tags)
    entries = image_entries()
    folder = cache_dir() / "images" / f"vllm-standin-{content_key(entries)}"
    layer, meta_path = folder / "layer.tar.gz", folder / "layer.json"

    def build_layer() -> None:
        digest, diff_id, size = oci.write_layer(entries, layer)
        tmp = meta_path.with_name(meta_path.name + ".tmp")
        tmp.write_text(json.dumps({"digest": digest, "diff_id": diff_id, "size": size}))
        os.replace(tmp, meta_path)

    build_once(meta_path, build_layer)
    meta = json.loads(meta_path.read_text())
    name = "+".join(tags)
    archive, digest_path = folder / f"{name}.tar", folder / f"{name}.digest"

    def build_archive() -> None:
        tmp_archive, tmp_digest = (path.with_name(path.name + ".tmp")
                                   for path in (archive, digest_path))
        tmp_digest.write_text(oci.write_archive(
            layer, meta, refs, tmp_archive, image_config(),
            history=f"localhosts/serving_image/build.py r{RECIPE_VERSION}"))
        os.replace(tmp_archive, archive)
        os.replace(tmp_digest, digest_path)

    build_once(digest_path, build_archive)
    return Image(refs, archive, digest_path.read_text())

