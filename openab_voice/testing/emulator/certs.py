"""A throwaway certificate authority and server certificate for the emulator's TLS listeners.

discord.py hard-codes ``wss://`` for the voice gateway (``DiscordVoiceWebSocket.from_connection_state``:
``gateway = f'wss://{state.endpoint}/?v=8'``), and the REST and main gateway URLs are ``https://`` /
``wss://`` too, so every listener speaks TLS. A tiny CA signs one leaf certificate (a CA and a separate
leaf, each with the key identifiers, satisfy OpenSSL's strict X.509 checks that newer Pythons enable);
clients trust only this CA through :func:`client_ssl_context`, never the system store.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

SERVER_NAMES: tuple[str, ...] = ("discord.com", "gateway.discord.gg")
# A fixed, wide validity window: OpenSSL checks it against the real time, while the emulator's
# clock may be a fake one, so no clock reading can be trusted to place it.
_NOT_BEFORE = datetime.datetime(2000, 1, 1, tzinfo=datetime.UTC)
_NOT_AFTER = datetime.datetime(2099, 12, 31, tzinfo=datetime.UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class EmulatorCertificate:
    """PEM material of one emulator run.

    Attributes:
        ca_pem: the CA certificate clients must trust.
        cert_pem: the server certificate (SANs: the Discord host names and IP 127.0.0.1).
        key_pem: the server's private key (unencrypted PKCS#8).
    """

    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes


def generate_certificate() -> EmulatorCertificate:
    """Create a fresh CA (new keys every run) and a server certificate signed by it."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "openab-voice emulator CA")])
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_NOT_BEFORE)
        .not_valid_after(_NOT_AFTER)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.DNSName(name) for name in SERVER_NAMES]
    sans.append(x509.IPAddress(ipaddress.IPv4Address("127.0.0.1")))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, SERVER_NAMES[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_NOT_BEFORE)
        .not_valid_after(_NOT_AFTER)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return EmulatorCertificate(
        ca_pem=ca_cert.public_bytes(serialization.Encoding.PEM),
        cert_pem=cert.public_bytes(serialization.Encoding.PEM),
        key_pem=key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
    )


def server_ssl_context(material: EmulatorCertificate) -> ssl.SSLContext:
    """A server-side context presenting the emulator certificate."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    # ``load_cert_chain`` only reads files; the key lives on disk for the duration of this call.
    with tempfile.TemporaryDirectory(prefix="openab-emulator-tls-") as tmp:
        cert_path = Path(tmp) / "cert.pem"
        key_path = Path(tmp) / "key.pem"
        cert_path.write_bytes(material.cert_pem + material.ca_pem)
        key_path.write_bytes(material.key_pem)
        key_path.chmod(0o600)
        ctx.load_cert_chain(cert_path, key_path)
    return ctx


def client_ssl_context(material: EmulatorCertificate) -> ssl.SSLContext:
    """A client-side context that trusts the emulator CA and nothing else."""
    return ssl.create_default_context(cadata=material.ca_pem.decode("ascii"))
