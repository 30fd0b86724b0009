"""Self-signed webhook certificates (Koordinator's ``pkg/webhook/util/generator`` and ``writer``).

``Artifacts`` are the four PEMs Koordinator keeps in the Secret ``koordinator-webhook-certs``: the CA key and
certificate (``ca-key.pem``, ``ca-cert.pem``) and the serving key and certificate (``key.pem`` / ``tls.key``,
``cert.pem`` / ``tls.crt``). ``problem`` says why a set cannot be served (missing, unparsable, key not
matching, not signed by the CA, not valid for the DNS name, or expiring within ``RENEW_BEFORE``: Koordinator
verifies at now + 6 months) -- ``None`` when it can. ``generate`` makes a new set, keeping a CA that is still
good for a year.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = [
    "CA_CERT",
    "CA_KEY",
    "CA_VALIDITY",
    "CERT_VALIDITY",
    "RENEW_BEFORE",
    "SERVER_CERT",
    "SERVER_CERT2",
    "SERVER_KEY",
    "SERVER_KEY2",
    "Artifacts",
    "expiry",
    "generate",
    "problem",
    "read_dir",
    "service_dns_name",
    "write_dir",
]

CA_KEY, CA_CERT = "ca-key.pem", "ca-cert.pem"
SERVER_KEY, SERVER_KEY2 = "key.pem", "tls.key"
SERVER_CERT, SERVER_CERT2 = "cert.pem", "tls.crt"
CA_VALIDITY = dt.timedelta(days=3650)  # client-go's NewSelfSignedCACert: 10 years
CERT_VALIDITY = dt.timedelta(days=3650)  # Koordinator's NewSignedCert: 10 years
RENEW_BEFORE = dt.timedelta(days=183)  # validCert verifies at now + 6 months
CA_RENEW_BEFORE = dt.timedelta(days=365)  # a CA still good for a year is kept (validCACert)
CA_COMMON_NAME = "webhook-cert-ca"


@dataclass(frozen=True)
class Artifacts:
    """One set of PEMs (bytes); ``resource_version`` of the Secret it was read from, if any."""

    ca_key: bytes = b""
    ca_cert: bytes = b""
    key: bytes = b""
    cert: bytes = b""
    resource_version: str = ""

    def files(self) -> dict[str, bytes]:
        """The Secret's ``data`` / the cert dir's files (both serving names, as Koordinator writes)."""
        return {
            CA_KEY: self.ca_key,
            CA_CERT: self.ca_cert,
            SERVER_KEY: self.key,
            SERVER_KEY2: self.key,
            SERVER_CERT: self.cert,
            SERVER_CERT2: self.cert,
        }

    @classmethod
    def from_files(cls, files: Mapping[str, bytes], resource_version: str = "") -> Artifacts:
        return cls(
            ca_key=files.get(CA_KEY, b""),
            ca_cert=files.get(CA_CERT, b""),
            key=files.get(SERVER_KEY) or files.get(SERVER_KEY2, b""),
            cert=files.get(SERVER_CERT) or files.get(SERVER_CERT2, b""),
            resource_version=resource_version,
        )


def service_dns_name(namespace: str, service: str) -> str:
    """``generator.ServiceToCommonName``: ``<service>.<namespace>.svc``."""
    return f"{service}.{namespace}.svc"


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _key() -> ec.EllipticCurvePrivateKey:
    # P-256 instead of Koordinator's RSA-2048: the same trust, and a TLS handshake several times cheaper for
    # a server that must answer the API server within its timeout.
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _new_ca(now: dt.datetime) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = _key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(CA_COMMON_NAME))
        .issuer_name(_name(CA_COMMON_NAME))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + CA_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=True,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _load_ca(
    ca_key: bytes, ca_cert: bytes, now: dt.datetime
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate] | None:
    """The CA of a previous set, when it parses, its key matches and it is good for ``CA_RENEW_BEFORE``."""
    try:
        key = serialization.load_pem_private_key(ca_key, password=None)
        cert = x509.load_pem_x509_certificate(ca_cert)
    except (ValueError, TypeError):
        return None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.public_key() != cert.public_key():
        return None
    if cert.not_valid_after_utc < now + CA_RENEW_BEFORE:
        return None
    return key, cert


def generate(dns_name: str, previous: Artifacts | None = None, now: dt.datetime | None = None) -> Artifacts:
    """A serving certificate for ``dns_name`` (an IP becomes an IP SAN; ``localhost`` always a DNS SAN),
    signed by the previous CA when it is still good, else by a new one."""
    now = now or _now()
    ca = _load_ca(previous.ca_key, previous.ca_cert, now) if previous is not None else None
    ca_key, ca_cert = ca if ca is not None else _new_ca(now)
    dns_names = ["localhost"]
    ips: list[x509.GeneralName] = []
    try:
        ips.append(x509.IPAddress(ipaddress.ip_address(dns_name)))
    except ValueError:
        dns_names.append(dns_name)
    key = _key()
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names] + ips
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(dns_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(min(now + CERT_VALIDITY, ca_cert.not_valid_after_utc))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    return Artifacts(
        ca_key=_pem_key(ca_key),
        ca_cert=ca_cert.public_bytes(serialization.Encoding.PEM),
        key=_pem_key(key),
        cert=cert.public_bytes(serialization.Encoding.PEM),
        resource_version=previous.resource_version if previous is not None else "",
    )


def expiry(certs: Artifacts) -> dt.datetime | None:
    """When the serving certificate expires (``None`` when it does not parse)."""
    try:
        return x509.load_pem_x509_certificate(certs.cert).not_valid_after_utc
    except ValueError:
        return None


def _covers(cert: x509.Certificate, dns_name: str) -> bool:
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    try:
        ip = ipaddress.ip_address(dns_name)
    except ValueError:
        return dns_name in sans.get_values_for_type(x509.DNSName)
    return ip in sans.get_values_for_type(x509.IPAddress)


def problem(certs: Artifacts | None, dns_name: str, now: dt.datetime | None = None) -> str | None:
    """Why ``certs`` cannot serve ``dns_name`` for another ``RENEW_BEFORE`` (``None``: they can)."""
    now = now or _now()
    if certs is None or not certs.cert or not certs.key or not certs.ca_cert:
        return "certificates are missing"
    try:
        cert = x509.load_pem_x509_certificate(certs.cert)
    except ValueError as exc:
        return f"serving certificate does not parse: {exc}"
    try:
        ca = x509.load_pem_x509_certificate(certs.ca_cert)
    except ValueError as exc:
        return f"CA certificate does not parse: {exc}"
    try:
        key = serialization.load_pem_private_key(certs.key, password=None)
    except (ValueError, TypeError) as exc:
        return f"serving key does not parse: {exc}"
    if key.public_key() != cert.public_key():
        return "serving key does not match the serving certificate"
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return "serving certificate is not signed by the CA"
    if not _covers(cert, dns_name):
        return f"serving certificate is not valid for {dns_name}"
    horizon = now + RENEW_BEFORE
    for what, c in (("serving", cert), ("CA", ca)):
        if c.not_valid_after_utc <= now:
            return f"{what} certificate expired at {c.not_valid_after_utc:%Y-%m-%dT%H:%M:%SZ}"
        if c.not_valid_after_utc < horizon:
            return (
                f"{what} certificate expires at {c.not_valid_after_utc:%Y-%m-%dT%H:%M:%SZ}, within 6 months"
            )
        if c.not_valid_before_utc > now:
            return f"{what} certificate is not valid before {c.not_valid_before_utc:%Y-%m-%dT%H:%M:%SZ}"
    return None


def read_dir(directory: Path) -> Artifacts | None:
    """The set in ``directory`` (``None`` when the directory or every file is missing)."""
    files: dict[str, bytes] = {}
    for name in (CA_KEY, CA_CERT, SERVER_KEY, SERVER_KEY2, SERVER_CERT, SERVER_CERT2):
        try:
            files[name] = (directory / name).read_bytes()
        except FileNotFoundError:
            continue
    return Artifacts.from_files(files) if files else None


def write_dir(directory: Path, certs: Artifacts) -> bool:
    """Write the set into ``directory`` (each file replaced atomically); whether anything changed."""
    directory.mkdir(parents=True, exist_ok=True)
    changed = False
    for name, data in certs.files().items():
        path = directory / name
        try:
            if path.read_bytes() == data:
                continue
        except FileNotFoundError:
            pass
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.chmod(tmp, 0o600)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        changed = True
    return changed
