"""The local cluster's certificates and kubeconfigs (made once per cluster, all or nothing).

One CA signs: the API server's serving certificate (127.0.0.1 and the `kubernetes` Service's IP),
the client certificates of the admin (`system:masters`, also what the controllers, the scheduler
and the API server's calls to the kubelet use), the kubelet (`system:node:<node>` in
`system:nodes`, which the Node authorizer expects) and kube-proxy (`system:kube-proxy`, bound to
`system:node-proxier` by default), the kubelet's serving certificate for the node's IP, and the
service-account key pair.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import shutil
import tempfile
from pathlib import Path

ADMIN, KUBELET, KUBE_PROXY = "admin", "kubelet", "kube-proxy"


def ensure_pki(folder: Path, name: str, service_ip: str, node: str, node_ip: str) -> Path:
    """`folder` with every certificate and key, made unless a complete set for this node exists."""
    stamp = folder / ".complete"
    if stamp.exists() and stamp.read_text() == f"{node} {node_ip}\n":
        return folder
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="pki.tmp.", dir=folder.parent))
    now = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)
    ten_years = now + datetime.timedelta(days=3650)

    def key(file: str) -> rsa.RSAPrivateKey:
        private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        (tmp / file).write_bytes(private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                       serialization.NoEncryption()))
        (tmp / file).chmod(0o600)
        return private

    def subject(cn: str, org: str | None = None) -> x509.Name:
        attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org)] if org else []
        return x509.Name([*attrs, x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    ca_key = key("ca.key")
    ca_name = subject(f"spear-fleet {name} CA")
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now).not_valid_after(ten_years)
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    (tmp / "ca.crt").write_bytes(ca.public_bytes(serialization.Encoding.PEM))

    def leaf(file: str, cn: str, usage: ExtendedKeyUsageOID, org: str | None = None,
             san: list[x509.GeneralName] | None = None) -> None:
        private = key(f"{file}.key")
        builder = (x509.CertificateBuilder().subject_name(subject(cn, org)).issuer_name(ca_name)
                   .public_key(private.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now).not_valid_after(ten_years)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
        if san:
            builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
        (tmp / f"{file}.crt").write_bytes(builder.sign(ca_key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM))

    ip = ipaddress.ip_address
    leaf("apiserver", "kube-apiserver", ExtendedKeyUsageOID.SERVER_AUTH, san=[
        x509.IPAddress(ip("127.0.0.1")), x509.IPAddress(ip(service_ip)),
        *(x509.DNSName(d) for d in ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"))])
    leaf(ADMIN, "admin", ExtendedKeyUsageOID.CLIENT_AUTH, org="system:masters")
    leaf(KUBELET, f"system:node:{node}", ExtendedKeyUsageOID.CLIENT_AUTH, org="system:nodes")
    leaf("kubelet-serving", node, ExtendedKeyUsageOID.SERVER_AUTH,
         san=[x509.IPAddress(ip(node_ip)), x509.DNSName(node)])
    leaf(KUBE_PROXY, "system:kube-proxy", ExtendedKeyUsageOID.CLIENT_AUTH)
    sa = key("sa.key")
    (tmp / "sa.pub").write_bytes(sa.public_key().public_bytes(serialization.Encoding.PEM,
                                                              serialization.PublicFormat.SubjectPublicKeyInfo))
    (tmp / ".complete").write_text(f"{node} {node_ip}\n")
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)
    return folder


def kubeconfig(pki: Path, server: str, name: str, user: str = ADMIN) -> str:
    """A kubeconfig for `user` (one of ADMIN, KUBELET, KUBE_PROXY), certificates embedded."""
    def data(file: str) -> str:
        return base64.b64encode((pki / file).read_bytes()).decode()

    context = f"spear-{name}"
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": context,
        "clusters": [{"name": context, "cluster": {"server": server, "certificate-authority-data": data("ca.crt")}}],
        "users": [{"name": f"{context}-{user}", "user": {"client-certificate-data": data(f"{user}.crt"),
                                                         "client-key-data": data(f"{user}.key")}}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": f"{context}-{user}"}}],
    }, indent=2) + "\n"
