"""The bundled Prometheus's image for the local cluster (vllmFleet.observability.prometheus
.mode: bundled): `localhost/spear-fleet/prometheus:<version>`, Debian's Prometheus server (the
binary scripts/setup.sh takes from Debian's prometheus package, as for the rule tests), python3
and its standard library for the pod-discovery sidecar (components/vllm_fleet/pod_discovery.py:
Debian's build has no Kubernetes discovery), and the shared libraries `ldd` lists for both, in
one layer (localhosts/images/image_files.py). The scrape configuration, the sidecar, the rules and the
gateway's key are mounted by the Deployment
(components/vllm_fleet/monitoring.py), which runs it as the image's unprivileged user.

Cached under `$SPEAR_CACHE/images/prometheus-<key>/`, keyed by each file's path, mode, size and
mtime.

CLI: `python -m localhosts.images.prometheus_image` prints the archive, ref and digest.
"""

from __future__ import annotations

import json

from components.vllm_fleet import monitoring
from localhosts.images import image_files
from localhosts.images.image_files import Entries, Image

REPOSITORY = "localhost/spear-fleet/prometheus"
BINARY = monitoring.SERVER
RECIPE_VERSION = 1  # bump when the recipe changes, so cached layers are rebuilt


def image_entries(binary: str) -> Entries:
    folders = {folder: 0o755 for folder in (monitoring.CONFIG_DIR, monitoring.RULES_DIR,
                                            monitoring.KEY_DIR, monitoring.TARGETS_DIR)}
    # An emptyDir is mounted over the data folder.
    return image_files.program_with_python(binary, BINARY, {**folders, monitoring.DATA_DIR: 0o1777})


def ensure_image() -> Image:
    binary = image_files.host_binary("prometheus")
    tag = image_files.reported_version(binary)
    entries = image_entries(binary)
    key = image_files.content_key(entries, RECIPE_VERSION)
    return image_files.cached_image(
        f"prometheus-{key}", (f"{REPOSITORY}:{tag}",), tag, lambda: entries,
        {"Env": [image_files.PATH_ENV, "PYTHONDONTWRITEBYTECODE=1"], "Entrypoint": [BINARY],
         "WorkingDir": monitoring.DATA_DIR, "User": str(image_files.UID)},
        history=f"localhosts/images/prometheus_image.py r{RECIPE_VERSION}")


if __name__ == "__main__":
    image = ensure_image()
    print(json.dumps({"archive": str(image.archive), "refs": image.refs, "digest": image.digest},
                     indent=2))
