"""The SSH host key a host presented at first contact, kept in state (trust on first use, which
the preview says), or the one the stack pins (ssh.hostKey), checked against the host: every other
resource of the host connects with it (pinned_connection), so a host presenting another key is
refused before anything is sent (components/hostops/known_hosts.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi

from components.hostops.host_resource import CheckProvider, HostResource
from components.hostops.known_hosts import fingerprint
from components.hostops.ssh import Session
from review.kinds import CREATE, IN_PLACE, REPLACE, Kind
from spear import tokens


@dataclass
class HostKeyArgs:
    connection: pulumi.Input[dict]  # connection_input's, without a host key
    target: pulumi.Input[str]  # user@host:port: another target is another host, so another key
    pinned: str | None = None  # ssh.hostKey, normalised


class HostKeyProvider(CheckProvider):
    replace_fields = ("target",)
    update_fields = ("pinned",)

    def resource_id(self, props: dict[str, Any]) -> str:
        return f"{props['target']}:host-key"

    def apply(self, props: dict[str, Any], olds: dict[str, Any] | None) -> dict[str, Any]:
        # Pinned: that key. Unpinned after a pin or a record: the key recorded before. First
        # contact: known_hosts if it knows the host, else whatever the host presents.
        expected = props.get("pinned") or (olds or {}).get("host_key")
        connection = {**props["connection"], "host_key": expected}
        with Session(connection, first_contact=not expected) as session:
            presented = session.host_key
        trusted = ("pinned (ssh.hostKey)" if props.get("pinned") else
                   "recorded before" if expected else session.trusted)
        return {**props, "host_key": f"{presented.get_name()} {presented.get_base64()}",
                "fingerprint": fingerprint(presented), "trusted": trusted}


KIND = Kind.of(tokens.HOST_KEY, "SSH host key", IN_PLACE, meanings={
    IN_PLACE: "checks the host against the newly pinned key (ssh.hostKey)",
    CREATE: "trusts the SSH host key the host presents now (trust on first use) unless"
            " ssh.hostKey pins one; every later connection to the host refuses any other key",
    REPLACE: "another host: the key it presents is trusted on first use again (pin ssh.hostKey"
             " to check it instead)",
})

class HostKey(HostResource, module=tokens.DYNAMIC_MODULE, name=tokens.HOST_KEY.name):
    host_key: pulumi.Output[str]
    fingerprint: pulumi.Output[str]
    trusted: pulumi.Output[str]

    def outputs(self) -> dict[str, pulumi.Output[str]]:
        """What each family exports about its host's key (`ssh_host_key`)."""
        return {"key": self.host_key, "fingerprint": self.fingerprint, "trusted": self.trusted}

    def __init__(self, name: str, args: HostKeyArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(HostKeyProvider(), name,
                         {"connection": args.connection, "target": args.target,
                          "pinned": args.pinned},
                         opts, outputs=("host_key", "fingerprint", "trusted"))


def pinned_connection(name: str, connection: pulumi.Input[dict], target: pulumi.Input[str],
                      pinned: str | None, opts: pulumi.ResourceOptions) -> tuple[HostKey, pulumi.Output]:
    """`<name>-host-key` and the connection every other resource of the host uses: `connection`
    with the key it recorded, so a host presenting another key is refused."""
    record = HostKey(f"{name}-host-key", HostKeyArgs(connection=connection, target=target,
                                                     pinned=pinned), opts)
    return record, pulumi.Output.secret(pulumi.Output.all(connection, record.host_key).apply(
        lambda both: {**both[0], "host_key": both[1]}))
