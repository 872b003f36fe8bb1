"""``effectgate tls generate``: a private CA and a NATS server certificate (``cryptography``, X.509 per RFC 5280).

For a deployment without a PKI of its own (``docker-compose.yml``): the CA signs one server
certificate naming the hosts clients dial (``subjectAltName``, RFC 6125 name checks), and its
private key is thrown away once it has, so nothing can sign another certificate with it.
Clients verify the server with ``ca.pem`` (``EFFECTGATE_NATS_CA_FILE``).
"""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from effectgate.cli.stack.credentials import write_private

__all__ = ["generate_tls"]

CA_FILE, CERT_FILE, KEY_FILE = "ca.pem", "server.pem", "server.key"


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _alt_names(hosts: list[str]) -> x509.SubjectAlternativeName:
    """DNS names, and IP addresses for hosts that are IP literals."""
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


def _builder(subject: str, issuer: str, public: ec.EllipticCurvePublicKey, days: int) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(_name(issuer))
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
    )


def _ca(days: int) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    usage = x509.KeyUsage(
        digital_signature=False,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=True,
        crl_sign=True,
        encipher_only=False,
        decipher_only=False,
    )
    certificate = (
        _builder("effectgate NATS CA", "effectgate NATS CA", key.public_key(), days)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(usage, critical=True)
        .sign(key, hashes.SHA256())
    )
    return certificate, key


def _server(
    hosts: list[str], ca_key: ec.EllipticCurvePrivateKey, days: int
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    usage = x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=False,
        crl_sign=False,
        encipher_only=False,
        decipher_only=False,
    )
    authority = x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key())
    certificate = (
        _builder(hosts[0], "effectgate NATS CA", key.public_key(), days)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(usage, critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(_alt_names(hosts), critical=False)
        .add_extension(authority, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return certificate, key


def _pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


def generate_tls(server_dir: Path, hosts: list[str], ca_dir: Path | None = None, days: int = 825) -> bool:
    """Write ``ca.pem``, ``server.pem`` and ``server.key`` into ``server_dir`` (and ``ca.pem`` into ``ca_dir``).

    Existing files are kept (the command runs at every ``docker compose up``).

    Args:
        server_dir: the nats-server's directory (its key, certificate and the CA).
        hosts: names and IP addresses clients dial; the first is the certificate's subject.
        ca_dir: a second directory for the CA certificate alone, for the clients to mount.
        days: validity of both certificates.

    Returns:
        ``True`` when new files were written, ``False`` when they existed.

    Raises:
        ValueError: ``hosts`` is empty.
        OSError: a directory or file cannot be written.
    """
    if not hosts:
        raise ValueError("name at least one host the clients dial (--host)")
    if all((server_dir / name).exists() for name in (CA_FILE, CERT_FILE, KEY_FILE)):
        if ca_dir is not None and not (ca_dir / CA_FILE).exists():
            _write_public(ca_dir / CA_FILE, (server_dir / CA_FILE).read_bytes())
        return False
    ca, ca_key = _ca(days)
    certificate, key = _server(hosts, ca_key, days)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    write_private(server_dir / KEY_FILE, private.decode())
    _write_public(server_dir / CERT_FILE, _pem(certificate))
    _write_public(server_dir / CA_FILE, _pem(ca))
    if ca_dir is not None:
        _write_public(ca_dir / CA_FILE, _pem(ca))
    return True


def _write_public(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
