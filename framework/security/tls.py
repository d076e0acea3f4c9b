"""TLS contexts from the ``ssl.*`` settings (Python's ``ssl``; PEM only, as Kafka's PEM keystores).

* :func:`server_context` for SSL and SASL_SSL listeners: the broker's certificate chain and key
  (``ssl.keystore.location``, a PEM file holding both, or ``ssl.keystore.certificate.chain`` and
  ``ssl.keystore.key`` as PEM text, the key decrypted with ``ssl.key.password``), and for
  ``ssl.client.auth`` requested/required the CAs client certificates must chain to
  (``ssl.truststore.location`` or ``ssl.truststore.certificates``). As in Kafka (KIP-684),
  ``ssl.client.auth`` applies to SSL listeners; SASL_SSL ones authenticate with SASL and ask
  for no client certificate.
* :func:`client_context` for replica fetchers connecting to another broker's SSL listener: the
  same truststore to check that broker's certificate (and its host name unless
  ``ssl.endpoint.identification.algorithm`` is empty), and the broker's own certificate for
  listeners that require one.

TLS 1.2 is the oldest version accepted (Kafka 4's ``ssl.enabled.protocols`` default is TLSv1.2
and TLSv1.3). A setting that cannot be loaded stops the broker with one line naming it.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from pathlib import Path

from framework import config as cfg
from framework.errors import ConfigError

CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def _load_keystore(ctx: ssl.SSLContext, c: cfg.BrokerConfig) -> bool:
    """Load the broker's certificate and key; False when none is configured."""
    location = c.str("ssl.keystore.location")
    chain, key = c.password("ssl.keystore.certificate.chain"), c.password("ssl.keystore.key")
    password = c.password("ssl.key.password") or None
    if location and (chain or key):
        raise ConfigError("give ssl.keystore.location or ssl.keystore.certificate.chain/key, not both")
    try:
        if location:
            ctx.load_cert_chain(location, password=password)
            return True
        if chain or key:
            if not (chain and key):
                raise ConfigError("ssl.keystore.certificate.chain and ssl.keystore.key go together")
            # ssl loads certificates and keys from files only: a private temporary file each,
            # removed as soon as they are read
            with tempfile.TemporaryDirectory(prefix="sftraffic-tls-") as d:
                cert_path, key_path = Path(d, "chain.pem"), Path(d, "key.pem")
                for path, text in ((cert_path, chain), (key_path, key)):
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                    with os.fdopen(fd, "w") as fh:
                        fh.write(text)
                ctx.load_cert_chain(cert_path, key_path, password=password)
            return True
    except FileNotFoundError:
        raise ConfigError(f"ssl.keystore.location {location} does not exist") from None
    except ssl.SSLError as exc:
        which = "ssl.keystore.location" if location else "ssl.keystore.certificate.chain/key"
        raise ConfigError(
            f"{which}: cannot load the certificate and private key ({exc.reason or exc}); "
            "a PEM with the certificate chain and the key is needed (ssl.key.password if it is encrypted)"
        ) from None
    return False


def _load_truststore(ctx: ssl.SSLContext, c: cfg.BrokerConfig) -> bool:
    location = c.str("ssl.truststore.location")
    certs = c.password("ssl.truststore.certificates")
    try:
        if location:
            ctx.load_verify_locations(cafile=location)
        if certs:
            ctx.load_verify_locations(cadata=certs)
    except FileNotFoundError:
        raise ConfigError(f"ssl.truststore.location {location} does not exist") from None
    except ssl.SSLError as exc:
        raise ConfigError(f"ssl.truststore: cannot load the CA certificates ({exc.reason or exc})") from None
    return bool(location or certs)


def server_context(c: cfg.BrokerConfig, client_auth: bool = True) -> ssl.SSLContext:
    """The context of SSL listeners, or with ``client_auth`` False of SASL_SSL ones."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if not _load_keystore(ctx, c):
        raise ConfigError(
            "an SSL or SASL_SSL listener needs the broker's certificate: set ssl.keystore.location "
            "(a PEM with the certificate chain and private key)"
        )
    mode = c.str("ssl.client.auth") if client_auth else "none"
    ctx.verify_mode = CLIENT_AUTH[mode]
    if not _load_truststore(ctx, c) and mode != "none":
        raise ConfigError(
            f"ssl.client.auth={mode} needs the CAs client certificates chain to: set ssl.truststore.location"
        )
    return ctx


def client_context(c: cfg.BrokerConfig) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if not _load_truststore(ctx, c):
        ctx.load_default_certs()
    ctx.check_hostname = c.str("ssl.endpoint.identification.algorithm") == "https"
    _load_keystore(ctx, c)
    return ctx
