"""The README's first command, as a newcomer runs it: `scripts/up-local` brings up the embedded
default (the inference host, the gateway, and the vLLM fleet on the local Kubernetes cluster) and
ends with every smoke test, each developer's answered through the gateway by the inference host and
by the fleet's pods (named), and the fleet's rollout; run again, it changes nothing.

The stack's state goes to a throwaway file backend (PULUMI_BACKEND_URL, which scripts/env.sh
keeps when set), so the developer's own `local` stack is never touched.
"""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from localhosts import local_stack
from localhosts.host import host_status
from tests.support.engine import REPO

# The local cluster runs the fleet: its binaries and the kubernetes plugin are built from Go modules.
pytestmark = pytest.mark.kubernetes

ANSWER = re.escape("end_turn | SPEAR-BACKEND-OK | ()")
LAST_LINES = [
    f"smoke test \\(local\\): {ANSWER}",
    # The inference host and the fleet's stable Service both answered, each pod named.
    *(f"smoke test \\(gateway, coder, {developer}\\): {ANSWER}; served by local,"
      r" vllm-stable \(vllm-stable-[a-z0-9]+-[a-z0-9]+\)" for developer in ("ana", "bob", "cyn")),
    # The hatch's cap, and the limit only the operator can set at the provider.
    re.escape("hatch: refused over 20 USD a month, alert at 15 USD; set the monthly spend limit of"
              " frontierApiKey's account at https://api.anthropic.com to 20 USD (it cannot be set"
              " from here)"),
    re.escape("vLLM fleet (local cluster, namespace vllm): stable"
              " localhost/spear-fleet/vllm-standin:v0.24.0 revision da6e2ed, 2/2 ready"),
]


def ends_with_the_report(stdout: str) -> bool:
    lines = stdout.strip().splitlines()[-len(LAST_LINES):]
    return len(lines) == len(LAST_LINES) and all(re.fullmatch(p, l) for p, l in zip(LAST_LINES, lines))


@pytest.fixture
def backend(tmp_path, kube_cluster):
    """The session's cluster is the local stack's own (one per machine: tests/support/kube.py);
    the hosts must be this test's."""
    running = [f"the `{name}` host" for name in (local_stack.LOCAL_HOST, local_stack.GATEWAY_HOST)
               if host_status(name) is not None]
    if running:
        pytest.fail(f"{' and '.join(running)} already running; stop them first:"
                    " .venv/bin/python -m localhosts.local_stack down")
    # A newcomer's machine has no hosts yet: boot both from the (cached) root filesystem, so what
    # an earlier local stack left on them (its gateway's keys, say) is not there. up-local then
    # finds them running and goes on.
    local_stack.start(fresh=True)
    local_stack.start_gateway(fresh=True)
    env = {**os.environ, "PULUMI_BACKEND_URL": f"file://{tmp_path}"}
    yield env
    subprocess.run(["bash", "-c", "source scripts/env.sh && pulumi destroy --yes --stack local"
                    " --non-interactive"], cwd=REPO, env=env, capture_output=True, check=False)
    local_stack.stop()
    local_stack.stop(local_stack.GATEWAY_HOST)


def up_local(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(REPO / "scripts" / "up-local")], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=3600)


def resource_summary(stdout: str) -> list[str]:
    """The lines of the "Resources:" block `pulumi up` ends with (after its preview's), e.g.
    ["+ 15 created", "49 unchanged"]."""
    blocks = re.findall(r"^Resources:\n((?:    .*\n)+)", stdout, re.MULTILINE)
    assert blocks, stdout[-4000:]
    return [line.strip() for line in blocks[-1].splitlines()]


def test_up_local_brings_up_the_whole_local_fleet_and_prints_every_smoke_test(backend):
    first = up_local(backend)
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-4000:]
    assert ends_with_the_report(first.stdout), first.stdout[-4000:]
    again = up_local(backend)
    assert again.returncode == 0, again.stdout[-4000:] + again.stderr[-4000:]
    assert ends_with_the_report(again.stdout), again.stdout[-4000:]
    [unchanged] = resource_summary(again.stdout)
    assert re.fullmatch(r"\d+ unchanged", unchanged), again.stdout[-4000:]
