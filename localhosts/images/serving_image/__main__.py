"""`python -m localhosts.images.serving_image [TAG ...]`: build (or reuse) the serving image archive
naming the image with each tag (default: build.TAGS), and print where it is."""

import json
import sys
import time

from localhosts.images.serving_image.build import TAGS, ensure_image

started = time.monotonic()
image = ensure_image(tuple(sys.argv[1:]) or TAGS)
print(json.dumps({"archive": str(image.archive), "refs": image.refs, "digest": image.digest,
                  "bytes": image.archive.stat().st_size,
                  "seconds": round(time.monotonic() - started, 1)}, indent=2))
