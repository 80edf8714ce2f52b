"""Certificates and keys for a test control plane, generated fresh for every run.

Two CAs, as in a real cluster: a serving CA that signs kube-apiserver's certificate (clients
verify the server with it) and a client CA that signs client certificates (the apiserver's
``--client-ca-file``; the certificate's CN is the user name, each O a group). Plus one key
pair for service-account tokens. EC P-256 keys throughout: generating one takes a millisecond,
where RSA-2048 takes tens.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = dt.timedelta(days=2)


@dataclass(frozen=True, slots=True)
class KeyPair:
    """A certificate and its private key, both PEM files."""

    cert: Path
    key: Path


@dataclass(frozen=True, slots=True)
class Authority:
    """A CA that can sign more certificates."""

    pair: KeyPair
    certificate: x509.Certificate
    private_key: ec.EllipticCurvePrivateKey

    def issue(
        self,
        directory: Path,
        name: str,
        *,
        common_name: str,
        organizations: tuple[str, ...] = (),
        server: bool = False,
    ) -> KeyPair:
        """Sign a leaf certificate: a server one (loopback names) or a client one."""
        key = ec.generate_private_key(ec.SECP256R1())
        attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
        builder = _certificate(
            x509.Name(attrs), self.certificate.subject, key.public_key(), ca=False
        ).add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [
                        x509.DNSName("localhost"),
                        x509.DNSName("kubernetes.default.svc"),
                        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                        x509.IPAddress(ipaddress.ip_address("10.0.0.1")),
                    ]
                ),
                critical=False,
            )
        cert = builder.sign(self.private_key, hashes.SHA256())
        return _write(directory, name, cert, key)


def _certificate(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey, *, ca: bool
) -> x509.CertificateBuilder:
    """A certificate of ``subject``'s key by ``issuer``, valid from 5 minutes ago for
    :data:`_VALIDITY`, a CA or not (critical basic constraints); extensions may follow."""
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )


def new_authority(directory: Path, name: str) -> Authority:
    """A self-signed CA."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"gpusched-test-{name}")])
    cert = (
        _certificate(subject, subject, key.public_key(), ca=True)
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
        .sign(key, hashes.SHA256())
    )
    return Authority(_write(directory, name, cert, key), cert, key)


def new_signing_key(directory: Path, name: str) -> KeyPair:
    """A signing key pair: ``key`` the private key (SEC1 PEM), ``cert`` the public key PEM
    (what ``--service-account-key-file`` reads; it does not accept a PKCS#8 private key)."""
    key = ec.generate_private_key(ec.SECP256R1())
    private = directory / f"{name}.key"
    public = directory / f"{name}.pub"
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    private.chmod(0o600)
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return KeyPair(public, private)


@dataclass(frozen=True, slots=True)
class Pki:
    """Everything a test control plane needs, written under one folder."""

    serving_ca: Authority
    client_ca: Authority
    apiserver: KeyPair
    admin: KeyPair
    service_account: KeyPair

    @classmethod
    def create(cls, directory: Path) -> Pki:
        directory.mkdir(parents=True, exist_ok=True)
        serving = new_authority(directory, "serving-ca")
        client = new_authority(directory, "client-ca")
        return cls(
            serving_ca=serving,
            client_ca=client,
            apiserver=serving.issue(
                directory, "apiserver", common_name="kube-apiserver", server=True
            ),
            admin=client.issue(
                directory, "admin", common_name="admin", organizations=("system:masters",)
            ),
            service_account=new_signing_key(directory, "service-account"),
        )


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write(
    directory: Path, name: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey
) -> KeyPair:
    cert_path = directory / f"{name}.crt"
    key_path = directory / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(_key_pem(key))
    key_path.chmod(0o600)
    return KeyPair(cert_path, key_path)
