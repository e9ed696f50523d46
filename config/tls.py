"""The gateway's TLS material (gateway.kubernetes.tls or gateway.listen.tls): what the config check refuses before any
resource exists, and the root certificate the gateway's clients are told to trust.

The stack gives a PEM bundle (`gatewayTlsCertificate`: the gateway's certificate first, then its
chain up to and including the self-signed root) and the certificate's key (`gatewayTlsKey`).
A private root is the usual case here: the seats and developers' harnesses trust exactly it.
"""

from __future__ import annotations

import datetime

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization

CERTIFICATE_TEXT = ("PEM certificates: the gateway's own first, then its chain up to and including"
                    " the self-signed root its clients trust")
KEY_TEXT = "the PEM private key of the first certificate in gatewayTlsCertificate"


def _chain(bundle: str) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(bundle.encode())


def certificate_problems(name: str, bundle: str, key: str, now: datetime.datetime | None = None,
                         setting: str = "gateway.kubernetes.tls") -> list[tuple[str, str, str]]:
    """(secret, what it is, what is allowed) for each way the material cannot serve `name`:
    a bundle or key that does not parse, a certificate that does not name `name`, is not valid
    now, or is not signed by the next one, a chain that does not end in a self-signed root,
    and a key that is not the certificate's."""
    try:
        chain = _chain(bundle)
    except ValueError:
        return [("gatewayTlsCertificate", "a secret that holds no PEM certificate", CERTIFICATE_TEXT)]
    problems = []
    leaf = chain[0]
    try:
        names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        dns_names = names.get_values_for_type(x509.DNSName)
    except x509.ExtensionNotFound:
        dns_names = []
    if name not in dns_names:
        problems.append(("gatewayTlsCertificate", f"a certificate for {', '.join(dns_names) or 'no DNS name'}",
                         f"a certificate whose subject alternative names hold {name}"
                         f" ({setting}.name)"))
    now = now or datetime.datetime.now(datetime.timezone.utc)
    for cert in chain:
        if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
            problems.append(("gatewayTlsCertificate", f"a certificate for {cert.subject.rfc4514_string()}"
                             f" valid {cert.not_valid_before_utc:%Y-%m-%d} to"
                             f" {cert.not_valid_after_utc:%Y-%m-%d}", "certificates valid now"))
    for cert, issuer in zip(chain, chain[1:] + chain[-1:]):
        try:
            cert.verify_directly_issued_by(issuer)
        except (ValueError, TypeError, InvalidSignature):
            problems.append(("gatewayTlsCertificate", f"a chain ending in {cert.subject.rfc4514_string()},"
                             " which is not self-signed" if cert is issuer else
                             f"{cert.subject.rfc4514_string()} not signed by"
                             f" {issuer.subject.rfc4514_string()}", CERTIFICATE_TEXT))
            break
    try:
        private = serialization.load_pem_private_key(key.encode(), password=None)
    except (ValueError, TypeError):
        problems.append(("gatewayTlsKey", "a secret that holds no unencrypted PEM private key", KEY_TEXT))
    else:
        if private.public_key() != leaf.public_key():
            problems.append(("gatewayTlsKey", "the key of another certificate", KEY_TEXT))
    return problems


def root_certificate(bundle: str) -> str:
    """The bundle's last certificate, its root, as PEM: what the gateway's clients trust."""
    return _chain(bundle)[-1].public_bytes(serialization.Encoding.PEM).decode()
