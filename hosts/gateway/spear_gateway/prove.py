"""The proof of a gateway pod's fleet routes, run as the pod's init container before LiteLLM
starts: `python -m spear_gateway.prove ROUTES.json`.

A gateway in the cluster proves the fleet's tracks from where its requests will start, its own
pod: the cookbook's three probes (spear/probes.py: the model list, a completion, the fail-closed
tool-call gate) and the smoke test (spear/smoke.py), against each route's Service, with the key
vLLM demands. A pod whose proof fails never becomes ready, so its Deployment's rollout stops
with the pods before it serving the routes they proved (maxUnavailable 0), and the message is
the pod's termination message, where the `up` reads it.

ROUTES.json: [{"route": "vllm-stable", "api_base": "http://10.96.100.10:8000/v1",
"served_model": "...", "key_env": "SPEAR_UPSTREAM_KEY_VLLM_STABLE"}, ...]. Stdlib only.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request

from spear import probes, smoke

# Right after a track's rollout its Service may refuse connections until kube-proxy has the new
# pods' endpoints: only nothing answering for this long fails.
REACH_SECONDS = 180.0
COMPLETION_TIMEOUT = 300.0
TERMINATION_LOG = "/dev/termination-log"


class ProofFailed(Exception):
    pass


def send(url: str, method: str, body: bytes, key: str | None,
         timeout: float) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body or None, method=method, headers={
        "Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def wait_for(root: str, route: str) -> None:
    deadline = time.monotonic() + REACH_SECONDS
    while True:
        try:
            send(f"{root}/health", "GET", b"", None, 5.0)
            return
        except OSError as err:
            if time.monotonic() > deadline:
                raise ProofFailed(f"endpoint {route}: unreachable at {root} for"
                                  f" {REACH_SECONDS:.0f} s ({err})") from err
            time.sleep(1)


def prove(route: dict) -> str:
    """Every check of one route; what passed, or ProofFailed with the first failure."""
    name, model = route["route"], route["served_model"]
    key = os.environ.get(route["key_env"]) if route.get("key_env") else None
    root = route["api_base"].removesuffix("/v1")
    wait_for(root, name)
    for probe in probes.probes(model):
        try:
            status, body = send(root + probe.path, probe.method, probe.encoded_body(), key,
                                COMPLETION_TIMEOUT)
        except OSError as err:
            raise ProofFailed(probes.failure(name, probes.ProbeResult(
                probe.name, False, "unreachable", str(err)))) from err
        result = probe.judge(status, body)
        if not result.passed:
            raise ProofFailed(probes.failure(name, result))
    status, body = send(f"{root}/v1/chat/completions", "POST", smoke.request_body(model), key,
                        COMPLETION_TIMEOUT)
    verdict = smoke.judge(json.loads(body)) if status == 200 else None
    if verdict is None or not verdict.passed:
        raise ProofFailed(f"endpoint {name}: smoke test failed: got"
                          f" `{verdict or f'HTTP {status}'}`, expected"
                          f" `end_turn | {smoke.EXPECTED_TEXT} | ()`")
    return f"{name}: {', '.join(p.name for p in probes.probes(model))}, smoke test passed"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m spear_gateway.prove ROUTES.json", file=sys.stderr)
        return 2
    with open(argv[1]) as handle:
        routes = json.load(handle)
    try:
        for route in routes:
            print(f"spear-prove: {prove(route)}", flush=True)
    except ProofFailed as failed:
        print(f"spear-prove: {failed}", file=sys.stderr, flush=True)
        try:
            with open(TERMINATION_LOG, "w") as log:
                log.write(str(failed)[:4000])  # the kubelet keeps 4096 bytes
        except OSError:
            pass  # not in a container
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
