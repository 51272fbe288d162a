"""Anomaly kinds the WebSocket transport reports (RFC 6455, RFC 7692). Stable snake_case strings
stored in ``anomalies.kind`` with ``source = 'websocket'``.

A violation never stops the transport unless it says so: the frame is decoded as well as it can
be and the rest of the stream flows. Only a frame length that cannot be trusted (64-bit length
with the top bit set) stops that direction, since no later frame boundary can be found.
"""

from __future__ import annotations

UPGRADE_REFUSED = "websocket_upgrade_refused"
"""The server answered the upgrade with a status other than 101: nothing is decoded as STOMP."""
NOT_STOMP = "websocket_not_stomp"
"""The server chose a subprotocol other than v10.stomp / v11.stomp / v12.stomp (or one the
client never offered): the connection is recorded, nothing is decoded as STOMP."""
BAD_HANDSHAKE = "websocket_bad_handshake"
"""The response's status line could not be read; the connection is recorded, nothing is decoded
as STOMP."""
UPGRADE_UNFINISHED = "websocket_upgrade_unfinished"
"""An upgrade left undecided past the bytes held per direction (64 KiB by default): the request
head did not end, or the response (head) did not come. The connection is decoded as STOMP over
TCP from its first byte, the bytes held included."""
UNMASKED_CLIENT_FRAME = "websocket_unmasked_client_frame"
"""A client frame without a mask (RFC 6455 5.1); its payload is used as it is."""
MASKED_SERVER_FRAME = "websocket_masked_server_frame"
"""A server frame with a mask (RFC 6455 5.1); its payload is unmasked and used."""
RESERVED_BITS = "websocket_reserved_bits"
"""RSV1 without permessage-deflate negotiated, RSV1 on a control or continuation frame, or RSV2
/ RSV3 set (no extension here defines them); the payload is used as it is."""
BAD_OPCODE = "websocket_bad_opcode"
"""A reserved opcode (3-7, 0xB-0xF); the frame is skipped."""
BAD_CONTROL_FRAME = "websocket_bad_control_frame"
"""A control frame with a payload over 125 bytes or without FIN; it is still read."""
NON_MINIMAL_LENGTH = "websocket_non_minimal_length"
"""A payload length in a longer form than needed (RFC 6455 5.2); the length is used."""
BAD_LENGTH = "websocket_bad_length"
"""A 64-bit payload length with the most significant bit set: the direction stops here."""
UNEXPECTED_CONTINUATION = "websocket_unexpected_continuation"
"""A continuation frame with no fragmented message open; its payload is used as a message."""
EXPECTED_CONTINUATION = "websocket_expected_continuation"
"""A new text or binary frame while a fragmented message was still open; the open message ends
there."""
INVALID_CLOSE = "websocket_invalid_close"
"""A close frame with a 1-byte payload, an invalid or reserved status code, or a reason that is
not UTF-8."""
INVALID_UTF8 = "websocket_invalid_utf8"
"""A text message that is not UTF-8; its bytes still go to the STOMP decoder."""
INFLATE_FAILED = "websocket_inflate_failed"
"""A compressed message could not be inflated (not DEFLATE data, or it inflates beyond 256 MiB);
it is lost to the STOMP stream. The direction goes on: uncompressed messages are decoded, and
so are later compressed ones when that side negotiated no context takeover."""
INFLATE_SKIPPED = "websocket_inflate_skipped"
"""A compressed message after a ``websocket_inflate_failed`` in a direction with context
takeover: the compression window it depends on is lost, so it is not inflated. One per message,
the detail counting them and naming the failure's TCP offset."""
DATA_AFTER_CLOSE = "websocket_data_after_close"
"""A data frame after that side's close frame; it is not decoded as STOMP."""
TRUNCATED_FRAME = "websocket_truncated_frame"
"""The direction ended (or lost bytes to a capture gap) inside a frame."""
GAP = "websocket_gap"
"""Bytes missing from the capture: frame boundaries are lost, so the direction stops."""
