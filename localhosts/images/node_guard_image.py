"""The node guard's image for the local cluster (agentSandbox.nodeGuard.image):
`localhost/spear-fleet/node-guard:<nft version>`, this machine's python3 and its standard library,
Debian's nft and the shared libraries `ldd` lists for both, in one layer
(localhosts/images/image_files.py). The guard's program and its settings are mounted by the DaemonSet
(components/agent_seats/node_guard.py, manifests.py), which runs it as root with NET_ADMIN on
the node's network. `python -m localhosts.local_stack up` loads it into the node and writes its
pinned reference where the local stack's nodeGuard.image.file reads it.

CLI: `python -m localhosts.images.node_guard_image` prints the archive, ref and digest.
"""

from __future__ import annotations

import json

from localhosts.images import image_files
from localhosts.images.image_files import Image

REPOSITORY = "localhost/spear-fleet/node-guard"
REF_NAME = "local-node-guard"  # the local stack's nodeGuard.image.file
RECIPE_VERSION = 1  # bump when the recipe changes, so cached layers are rebuilt


def ensure_image() -> Image:
    binary = image_files.host_binary("nft")
    tag = image_files.reported_version(binary)
    entries = image_files.program_with_python(binary, "/usr/sbin/nft")
    key = image_files.content_key(entries, RECIPE_VERSION)
    return image_files.cached_image(
        f"node-guard-{key}", (f"{REPOSITORY}:{tag}",), tag, lambda: entries,
        {"Env": [image_files.PATH_ENV, "PYTHONDONTWRITEBYTECODE=1"], "Entrypoint": ["python3"]},
        history=f"localhosts/images/node_guard_image.py r{RECIPE_VERSION}")


if __name__ == "__main__":
    image = ensure_image()
    print(json.dumps({"archive": str(image.archive), "refs": image.refs, "digest": image.digest,
                      "pinned": image.pinned}, indent=2))
