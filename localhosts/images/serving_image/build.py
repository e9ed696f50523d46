"""The local stack's serving image: `localhost/spear-fleet/vllm-standin:<tag>`, the stand-in for
vllm/vllm-openai on the local cluster's real node, which has no GPU to run vLLM on.

One layer, taken from this machine (Debian 12, the node's release): python3.11 and its standard
library, the shared libraries `ldd` lists for python, its extension modules and llama-server,
the local stack's llama-server (with the .so files it builds next to it, found through its RPATH
$ORIGIN), the tiny models, and the vllm stand-in (vllm_standin.py) as /usr/local/bin/vllm with
its config, which maps each model id the fleet may ask for to a gguf and llama-server flags.

Made with localhosts/images/image_files.py (written as an OCI image layout tar by localhosts/images/oci.py),
one name per tag. Cached under `$SPEAR_CACHE/images/`, keyed on what goes in (each file's image
path, mode, size and mtime: the llama build and the models sit in content-keyed files already);
the layer is built once per key and every set of tags gets its archive from it.

CLI: `python -m localhosts.images.serving_image [TAG ...]` prints the archive, refs and digest.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from localhosts.standins import tiny_model
from localhosts.images.image_files import (PATH_ENV, Entries, Image, add_host_file, add_libraries,
                                    add_python, cached_image, content_key, finish)
from localhosts.hosts.llama_build import local_stack_llama_server

REPOSITORY = "localhost/spear-fleet/vllm-standin"
TAG = "v0.24.0"  # the local stack's pair tag
# The engine versions the image answers as on the local cluster: the local stack's, and the
# canary and promotion pairs the tests roll out (the same stand-in under each name).
TAGS = (TAG, "v0.25.0", "v0.26.0")
# Bump when the image's recipe changes, so cached layers are rebuilt.
RECIPE_VERSION = 1
STANDIN = Path(__file__).resolve().parent / "vllm_standin.py"
LLAMA_DIR = "/opt/llama/bin"  # llama-server and its libraries together, for its RPATH $ORIGIN
MODELS_DIR = "/opt/vllm-standin/models"
CONFIG_PATH = "/etc/vllm-standin.json"
# The local stack's stable model (the smoke model), and a canary's model whose template knows no
# tools, so its tool-call markup stays in the text: the parser trap, which endpoint verification
# names parser-not-configured. It is the tiny model that says the markup to every prompt: the smoke
# model under chatml would answer the tools prompt with its plain text (no-tool-call).
STABLE_MODEL = "Qwen/Qwen3-Coder-Next-FP8"
NO_TOOL_TEMPLATE_MODEL = "spear-fleet/tiny-no-tool-template"
# What the tiny models are given at most, whatever --max-model-len says: the local stack's
# maxModelLen in each of the 2 slots (their KV cache is 512 bytes a token: 32 MiB).
MAX_CTX = 65536
# The tiny models' trained length and architecture: llama-server caps each slot at the trained
# length unless told to stretch it (the stand-in then passes the YaRN flags serve.sh does).
NATIVE = {"native_ctx": tiny_model.CONTEXT_LENGTH, "arch": "llama"}
# Held to a harness's tools (llama-server's grammar), the smoke model's tool call names one of
# them and fills its arguments at random: with one seed for every request, a harness version
# makes the same call every run, so its turn (and its dialect check) does not pass or fail by
# luck. Its tool list still decides the call; the four pinned versions each complete a turn
# with this seed (tests/integration/test_gateway_in_cluster.py).
SAMPLING = ["--seed", "1234"]


# ---------------------------------------------------------------------------------------------
# What goes in


def standin_config(models: dict[str, Path]) -> dict:
    """/etc/vllm-standin.json: llama-server, and each model id's gguf (by its file name in
    MODELS_DIR) and flags."""
    smoke = f"{MODELS_DIR}/{models['smoke'].name}"
    return {
        "llama_server": f"{LLAMA_DIR}/llama-server",
        "host": "0.0.0.0",
        "models": {
            STABLE_MODEL: {"gguf": smoke, "flags": SAMPLING, "max_ctx": MAX_CTX, **NATIVE},
            # chatml: a template without tools, so llama-server extracts no tool call.
            NO_TOOL_TEMPLATE_MODEL: {"gguf": f"{MODELS_DIR}/{models['no_tool_template'].name}",
                                     "flags": ["--chat-template", "chatml"], "max_ctx": MAX_CTX,
                                     **NATIVE},
        },
    }


def image_entries() -> Entries:
    """Everything the layer holds."""
    llama_server = local_stack_llama_server()
    models = {"smoke": tiny_model.ensure_model(tiny_model.SMOKE_ANSWER),
              "no_tool_template": tiny_model.ensure_model(tiny_model.TOOL_CALL_ANSWER)}
    entries: Entries = {}
    elves = add_python(entries)
    llama_files = sorted(p for p in llama_server.parent.iterdir()
                         if p.name == "llama-server" or ".so" in p.name)
    for path in llama_files:
        if path.is_symlink():  # libllama.so -> libllama.so.0 and the like, all in one folder
            entries[f"{LLAMA_DIR}/{path.name}"] = ("symlink", os.readlink(path))
        else:
            add_host_file(str(path), entries, at=f"{LLAMA_DIR}/{path.name}")
            elves.append(str(path))
    add_libraries(elves, entries, own=[str(llama_server.parent)])  # its own, added above
    for path in {str(p) for p in models.values()}:
        add_host_file(path, entries, at=f"{MODELS_DIR}/{Path(path).name}")
    entries["/usr/local/bin/vllm"] = ("file", str(STANDIN), 0o755)
    entries[CONFIG_PATH] = ("data", json.dumps(standin_config(models), indent=2).encode(), 0o644)
    finish(entries)
    return entries


def image_config() -> dict:
    return {"Env": [PATH_ENV], "Cmd": ["vllm", "serve"], "WorkingDir": "/"}


def ensure_image(tags: tuple[str, ...] = TAGS) -> Image:
    """The image archive naming it `REPOSITORY:<tag>` for each of `tags`, built once per content
    and tags."""
    if not tags:
        raise ValueError("an image needs at least one tag")
    refs = tuple(f"{REPOSITORY}:{tag}" for tag in tags)
    entries = image_entries()
    return cached_image(f"vllm-standin-{content_key(entries, RECIPE_VERSION)}", refs,
                        "+".join(tags), lambda: entries, image_config(),
                        history=f"localhosts/images/serving_image/build.py r{RECIPE_VERSION}")
