"""Throwaway TLS material for one run: a CA that signs one server certificate, then is forgotten.

Experiments that compare TLS on and off (``labkit upload``) need a server
certificate the client can verify, for an address that exists only on the
testbed or in one lab. :func:`write_throwaway_pki` makes a fresh CA and a
server certificate naming that address (an IP SAN for an IP address, a DNS SAN
for a name), writes the CA certificate, the server certificate and the
server's private key (mode 0600) into a directory, and keeps the CA's private
key nowhere: nothing else can ever be signed with it.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

VALID_DAYS = 7


@dataclass(frozen=True)
class Pki:
    """Paths of the material, and what the manifest records about it."""

    ca_cert: Path
    server_cert: Path
    server_key: Path
    server_name: str
    not_after_utc: str
    ca_sha256: str  # fingerprint of the CA certificate (DER)


def _write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` readable by its owner only, from the first byte on."""
    path.unlink(missing_ok=True)
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:
        out.write(data)


def write_throwaway_pki(directory: str | os.PathLike, server_name: str, *, days: int = VALID_DAYS) -> Pki:
    """A new CA and a server certificate for ``server_name`` (IP address or DNS name), written to ``directory``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    now = datetime.datetime.now(datetime.timezone.utc)
    # A few minutes' slack for hosts whose clocks lag the controller's.
    valid = {"not_valid_before": now - datetime.timedelta(minutes=10), "not_valid_after": now + datetime.timedelta(days=days)}

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "labkit throwaway CA")])
    ca_cert = (
        x509.CertificateBuilder(subject_name=ca_name, issuer_name=ca_name, public_key=ca_key.public_key(),
                                serial_number=x509.random_serial_number(), **valid)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                     key_encipherment=False, data_encipherment=False, key_agreement=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    try:
        san = x509.IPAddress(ipaddress.ip_address(server_name.strip("[]")))
    except ValueError:
        san = x509.DNSName(server_name)
    server_key = ec.generate_private_key(ec.SECP256R1())
    server_cert = (
        x509.CertificateBuilder(
            subject_name=x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, server_name)]),
            issuer_name=ca_name, public_key=server_key.public_key(),
            serial_number=x509.random_serial_number(), **valid,
        )
        .add_extension(x509.SubjectAlternativeName([san]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    pki = Pki(directory / "ca.pem", directory / "server.pem", directory / "server.key", server_name,
              valid["not_valid_after"].strftime("%Y-%m-%dT%H:%M:%SZ"),
              hashlib.sha256(ca_cert.public_bytes(serialization.Encoding.DER)).hexdigest())
    pki.ca_cert.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    pki.server_cert.write_bytes(server_cert.public_bytes(serialization.Encoding.PEM))
    _write_private(pki.server_key, server_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return pki


def existing_pki(directory: str | os.PathLike, server_name: str, *, min_hours_left: float = 12) -> Pki | None:
    """The material a previous attempt wrote to ``directory``, if it names ``server_name`` and stays valid a while."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    directory = Path(directory)
    paths = directory / "ca.pem", directory / "server.pem", directory / "server.key"
    if not all(path.is_file() for path in paths):
        return None
    try:
        ca = x509.load_pem_x509_certificate(paths[0].read_bytes())
        cert = x509.load_pem_x509_certificate(paths[1].read_bytes())
    except ValueError:
        return None
    left = cert.not_valid_after_utc - datetime.datetime.now(datetime.timezone.utc)
    if cert.subject.rfc4514_string() != f"CN={server_name}" or left < datetime.timedelta(hours=min_hours_left):
        return None
    return Pki(*paths, server_name, cert.not_valid_after_utc.strftime("%Y-%m-%dT%H:%M:%SZ"),
               hashlib.sha256(ca.public_bytes(serialization.Encoding.DER)).hexdigest())
