"""The vLLM fleet as the cluster's test modules read it: a track's Deployment off the API server,
and `coder` asked through a gateway with a developer's key, with the route and the pod that
answered (the gateway's and the serving image's response headers)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from spear import vllm


def deployment(client, namespace: str, track: str) -> dict | None:
    return client.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/vllm-{track}")


def serving(client, namespace: str, track: str) -> tuple[str, str, str]:
    """(image, model, --revision) of a track's Deployment, as the cluster has it."""
    [container] = deployment(client, namespace, track)["spec"]["template"]["spec"]["containers"]
    return container["image"], container["command"][2], vllm.flags(container["command"])["--revision"]


def available(client, namespace: str, track: str, replicas: int) -> bool:
    status = deployment(client, namespace, track)["status"]
    conditions = {c["type"]: c["status"] for c in status.get("conditions") or ()}
    return (conditions.get("Available") == "True" and status.get("availableReplicas") == replicas
            and status.get("updatedReplicas") == replicas and status.get("replicas") == replicas)


def ask(gateway: str, key: str, messages: list[dict[str, str]] | None = None,
        **extra: Any) -> tuple[int, dict[str, str], dict[str, Any]]:
    """One `coder` chat completion through the gateway at `gateway` (by default the smoke test's
    ask): (status, headers, answer)."""
    body = {"model": "coder", "max_tokens": 32, **extra, "messages": messages or [
        {"role": "user", "content": "Reply with exactly: SPEAR-BACKEND-OK"}]}
    request = urllib.request.Request(f"{gateway}/v1/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json",
                                              "Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(request, timeout=300) as answer:
            return answer.status, {k.lower(): v for k, v in answer.getheaders()}, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, {}, json.loads(error.read() or b"{}")


def served_by(gateway: str, key: str, times: int, **extra: Any) -> list[tuple[str, str]]:
    """(route, pod) of each of `times` requests; every one must be answered."""
    seen = []
    for _ in range(times):
        status, headers, answer = ask(gateway, key, **extra)
        assert status == 200, answer
        seen.append((headers.get("x-litellm-model-id"), headers.get("llm_provider-x-spear-standin-pod")))
    return seen
