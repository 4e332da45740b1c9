"""A SASL_SSL listener for the local broker (``LocalBroker(security="sasl_ssl")``): SCRAM-SHA-512 over TLS, as
managed Kafka services (MSK, Confluent Cloud, Aiven, Strimzi) are reached.

At start a throw-away certificate authority and the broker's key pair are made with the JDK's ``keytool`` (PKCS12,
valid for two days, the broker's certificate for ``127.0.0.1`` / ``localhost``), in the broker's home; clients trust
``ca.pem`` (librdkafka's ``ssl.ca.location``). The SCRAM user is created through the broker's plaintext listener
(the Admin API's AlterUserScramCredentials, what ``kafka-configs.sh --alter --add-config SCRAM-SHA-512=...`` sends),
with a random password unless one is given. The plaintext listener stays for the tests' own producers and admin.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MECHANISM = "SCRAM-SHA-512"
LISTENER = "SASL_SSL"
SAN = "IP:127.0.0.1,DNS:localhost"


@dataclass(frozen=True)
class Tls:
    """The broker's keystore and the CA clients trust."""

    keystore: Path
    password: str
    ca_pem: Path


def keytool(*args: str, cwd: Path) -> None:
    tool = shutil.which("keytool") or "keytool"
    fast = ("-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC", "-J-Xshare:auto")  # seven short JVMs
    proc = subprocess.run([tool, *args, *fast], cwd=cwd, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"keytool {args[0]} failed: {proc.stdout}{proc.stderr}")


def make_tls(home: Path) -> Tls:
    """A CA and a broker certificate it signed, under ``home/tls`` (made once per broker home)."""
    where = home / "tls"
    keystore, ca_pem, pw_file = where / "broker.p12", where / "ca.pem", where / "password"
    if keystore.exists() and ca_pem.exists() and pw_file.exists():  # a restart keeps its certificates
        return Tls(keystore, pw_file.read_text(), ca_pem)
    where.mkdir(parents=True, exist_ok=True)
    pw = secrets.token_hex(12)
    store = ("-storetype", "PKCS12", "-storepass", pw)
    keytool("-genkeypair", "-alias", "ca", "-keyalg", "RSA", "-keysize", "2048", "-validity", "2",
            "-dname", "CN=cdc-iceberg test CA", "-ext", "bc:c", "-keystore", "ca.p12", *store, cwd=where)
    keytool("-exportcert", "-rfc", "-alias", "ca", "-keystore", "ca.p12", *store, "-file", "ca.pem", cwd=where)
    keytool("-genkeypair", "-alias", "broker", "-keyalg", "RSA", "-keysize", "2048", "-validity", "2",
            "-dname", "CN=127.0.0.1", "-ext", f"SAN={SAN}", "-keystore", "broker.p12", *store, cwd=where)
    keytool("-certreq", "-alias", "broker", "-keystore", "broker.p12", *store, "-file", "broker.csr", cwd=where)
    keytool("-gencert", "-rfc", "-alias", "ca", "-keystore", "ca.p12", *store, "-infile", "broker.csr",
            "-outfile", "broker.pem", "-validity", "2", "-ext", f"SAN={SAN}", cwd=where)
    keytool("-importcert", "-noprompt", "-alias", "ca", "-file", "ca.pem", "-keystore", "broker.p12", *store,
            cwd=where)
    keytool("-importcert", "-noprompt", "-alias", "broker", "-file", "broker.pem", "-keystore", "broker.p12",
            *store, cwd=where)
    pw_file.write_text(pw)
    return Tls(keystore, pw, ca_pem)


def listener_settings(host: str, port: int, sasl_port: int, controller_port: int, tls: Tls) -> dict[str, str]:
    """Broker properties (over ``devtools.broker.server_properties``'s) adding the SASL_SSL listener."""
    return {
        "listeners": f"PLAINTEXT://{host}:{port},{LISTENER}://{host}:{sasl_port},CONTROLLER://{host}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{host}:{port},{LISTENER}://{host}:{sasl_port}",
        "listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,{LISTENER}:{LISTENER}",
        "sasl.enabled.mechanisms": MECHANISM,
        f"listener.name.{LISTENER.lower()}.{MECHANISM.lower()}.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        f"listener.name.{LISTENER.lower()}.ssl.keystore.location": str(tls.keystore),
        f"listener.name.{LISTENER.lower()}.ssl.keystore.password": tls.password,
        f"listener.name.{LISTENER.lower()}.ssl.key.password": tls.password,
        f"listener.name.{LISTENER.lower()}.ssl.keystore.type": "PKCS12",
        f"listener.name.{LISTENER.lower()}.ssl.client.auth": "none",
    }


def add_scram_user(admin: Any, user: str, password: str, timeout: float = 30.0) -> None:
    """Create (or update) ``user``'s SCRAM-SHA-512 credential and wait until the broker lists it."""
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    deadline = time.monotonic() + timeout
    while True:
        try:
            for f in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(user, info,
                                                                                       password.encode())]).values():
                f.result(10)
            found = admin.describe_user_scram_credentials([user])
            if all(f.result(10) for f in found.values()):
                return
        except Exception:  # noqa: BLE001 - the controller may not take it yet right after start
            if time.monotonic() > deadline:
                raise
        time.sleep(0.3)


def client_conf(host: str, sasl_port: int, user: str, password: str, tls: Tls) -> dict[str, str]:
    """librdkafka properties that reach the broker through the SASL_SSL listener."""
    return {"bootstrap.servers": f"{host}:{sasl_port}", "security.protocol": LISTENER, "sasl.mechanism": MECHANISM,
            "sasl.username": user, "sasl.password": password, "ssl.ca.location": str(tls.ca_pem)}


def new_password() -> str:
    return secrets.token_urlsafe(18)
