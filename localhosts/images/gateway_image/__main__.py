"""`python -m localhosts.images.gateway_image [VERSION]`: build (or reuse) the gateway image archive for
LiteLLM VERSION (default: build.VERSION), and print where it is."""

import json
import sys
import time

from localhosts.images.gateway_image.build import VERSION, ensure_image

started = time.monotonic()
image = ensure_image(*sys.argv[1:2] or (VERSION,))
print(json.dumps({"archive": str(image.archive), "refs": image.refs, "digest": image.digest,
                  "bytes": image.archive.stat().st_size,
                  "seconds": round(time.monotonic() - started, 1)}, indent=2))
