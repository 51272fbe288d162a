"""STOMP over TLS seen passively: TLS records decrypted with the secrets of a key log (sans-IO)."""

from pipeline.tls.keylog import KeyLog, Secrets, read_keylogs
from pipeline.tls.session import Plaintext, TlsAnomaly, TlsFacts, TlsSession

__all__ = ["KeyLog", "Plaintext", "Secrets", "TlsAnomaly", "TlsFacts", "TlsSession", "read_keylogs"]
