"""prod's commented gateway example, uncommented: `pulumi preview` on the real engine with the
policy pack shows the gateway's parts and one key per developer without reaching the gateway
host (gateway.internal does not resolve here), passes every rule, and never shows a secret."""

from __future__ import annotations

import json
import subprocess

import pytest

from localhosts.engine import repo_stack
from tests.support import tls
from tests.support.config_cases import FRONTIER_KEY, MASTER_KEY
from tests.support.pack_runs import preview_with_pack

# The prod stack declares the vLLM fleet: its preview needs the kubernetes plugin.
pytestmark = pytest.mark.kubernetes

EXAMPLE = ("gateway", "developers", "gatewayMasterKey", "frontierApiKey", "gatewayBackupKey")


def uncomment(text: str, key: str) -> str:
    """The stack file with the commented block of one key uncommented (as a user does)."""
    lines = text.splitlines()
    start = lines.index(f"  # spear-fleet:{key}:")
    end = start + 1
    while end < len(lines) and lines[end].startswith("  #  "):
        end += 1
    block = [line.replace("# ", "", 1) for line in lines[start:end]]
    return "\n".join(lines[:start] + block + lines[end:]) + "\n"


def test_prod_with_the_gateway_example_previews_without_its_host_and_passes_the_pack(tmp_path):
    project = repo_stack(tmp_path, "prod")
    stack_file = project.dir / "stacks" / "Pulumi.prod.yaml"
    text = stack_file.read_text()
    for key in EXAMPLE:
        text = uncomment(text, key)
    stack_file.write_text(text)
    key = tmp_path / "id_ed25519_gateway"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    project.set_config("prod", "gateway.ssh.privateKeyPath", str(key))
    # The example's HTTPS listener serves a certificate for its name (secrets, as a user sets
    # them: pulumi config set --secret gatewayTlsCertificate < file).
    certificate, tls_key = tls.issue("gateway.spear.internal")
    for name, pem in (("gatewayTlsCertificate", certificate), ("gatewayTlsKey", tls_key)):
        project.pulumi("config", "set", "--secret", "--stack", "prod", f"spear-fleet:{name}",
                       stdin=pem)

    run = preview_with_pack(project, "prod")

    assert run.ok, run.output[-4000:]
    assert run.policy_violations() == []
    creates = {step["urn"].rsplit("::", 1)[1] for step in run.preview["steps"]
               if step["op"] == "create"}
    assert {"gateway-litellm", "gateway-postgresql", "gateway-migrations", "gateway-config",
            "gateway-env", "gateway-tunnel-reds", "gateway-service", "gateway-key-ana",
            "gateway-key-bob", "gateway-tls-gateway-crt", "gateway-tls-gateway-key"} <= creates
    shown = run.output + json.dumps(run.preview) + json.dumps(run.events)
    for secret in (MASTER_KEY, FRONTIER_KEY, tls_key.splitlines()[1]):
        assert secret not in shown
