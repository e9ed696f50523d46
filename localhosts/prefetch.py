"""What the tests install on first use, made ahead: scripts/test runs `python -m localhosts.prefetch`
in the background from its start, beside the Go and C++ builds. These installs wait mostly on the
package registries and the disk, where the builds wait on the cores, so the two overlap; made on
first use instead, the tests waited for each in turn (a cold run of de474db, docs/BENCHMARKS.md:
the LiteLLM virtualenvs until minutes 19 and 24, the harnesses until 22 to 40, and the cluster's
tests for the seat image until 41, three minutes after their binaries were built).

Each step takes the lock its first user takes (components/cache.py and the modules below), so a
test that needs one before it is made waits for it, and nothing is made twice. A step that fails
is reported and the next one runs: the test that needs it makes it again and fails with its own
error. In the order the tests first need them.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable

from localhosts.images import gateway_image, harness_install, seat_image
from localhosts.servers.litellm_venv import TESTED_LITELLM, litellm_venv
from spear.harness import DEFAULT_VERSIONS, HARNESSES


def steps() -> list[tuple[str, Callable[[], object]]]:
    return [*((f"LiteLLM {v}", lambda v=v: litellm_venv(v)) for v in TESTED_LITELLM),
            *((f"harness {h}", lambda h=h: harness_install.install(h, DEFAULT_VERSIONS[h]))
              for h in HARNESSES),
            ("the seat image", seat_image.ensure_image),
            ("the gateway image", gateway_image.ensure_image)]


def main() -> int:
    failed = []
    for what, make in steps():
        try:
            make()
        except Exception:  # noqa: BLE001 - reported; the test that needs it fails with its own error
            traceback.print_exc()
            failed.append(what)
    if failed:
        print(f"prefetch: failed: {', '.join(failed)} (the tests that need them make them again)",
              file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
