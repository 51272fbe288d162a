"""TLS contexts of a listener: terminating ``stomp+ssl`` from clients, TLS to the broker.

Broker certificates are verified (CA bundle or the system store, and the host name) unless
the listener turns verification off explicitly.
"""

from __future__ import annotations

import ssl

from capture.config import ListenerConfig


def client_ssl_context(listener: ListenerConfig) -> ssl.SSLContext | None:
    tls = listener.client_tls
    if tls is None:
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tls.cert, tls.key)
    return context


def upstream_ssl_context(listener: ListenerConfig) -> ssl.SSLContext | None:
    tls = listener.upstream_tls
    if tls is None:
        return None
    context = ssl.create_default_context(cafile=str(tls.ca) if tls.ca else None)
    if not tls.verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if tls.cert is not None:
        context.load_cert_chain(tls.cert, tls.key)
    return context
