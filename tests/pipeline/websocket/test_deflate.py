"""permessage-deflate inflation on its own: messages compressed as RFC 7692 says a sender does
(raw DEFLATE, sync flush, the ``00 00 ff ff`` tail removed), by zlib."""

from __future__ import annotations

import pickle
import zlib

import pytest

from pipeline.websocket.deflate import MAX_MESSAGE, MAX_PIECE, MESSAGE_TAIL, InflateError, Inflater

STOMP = b"SEND\ndestination:/queue/a\ncontent-type:text/plain\n\nhello, queue a\x00"


class Sender:
    """One side's compressor: with context takeover its window carries over between
    messages; without, each message is compressed afresh."""

    def __init__(self, *, no_context_takeover: bool = False, window_bits: int = 15) -> None:
        self.no_context_takeover = no_context_takeover
        self.window_bits = window_bits
        self._compressor = self._fresh()

    def _fresh(self) -> zlib._Compress:
        return zlib.compressobj(6, zlib.DEFLATED, -self.window_bits)

    def message(self, data: bytes) -> bytes:
        if self.no_context_takeover:
            self._compressor = self._fresh()
        out = self._compressor.compress(data) + self._compressor.flush(zlib.Z_SYNC_FLUSH)
        assert out.endswith(MESSAGE_TAIL)
        return out[: -len(MESSAGE_TAIL)]


def test_the_tail_is_what_a_sync_flush_ends_with() -> None:
    flushed = zlib.compressobj(6, zlib.DEFLATED, -15)
    assert (flushed.compress(b"x") + flushed.flush(zlib.Z_SYNC_FLUSH)).endswith(MESSAGE_TAIL)
    assert bytes([0x00, 0x00, 0xFF, 0xFF]) == MESSAGE_TAIL  # RFC 7692 7.2.1


@pytest.mark.parametrize("no_context_takeover", [False, True])
def test_a_message_inflates_back_to_what_was_sent(no_context_takeover: bool) -> None:
    inflater = Inflater(no_context_takeover)
    assert inflater.end_message(Sender().message(STOMP)) == STOMP


def test_a_message_fed_in_pieces_inflates_to_the_same_bytes() -> None:
    compressed = Sender().message(STOMP * 20)
    inflater = Inflater(no_context_takeover=False)
    pieces = [compressed[i : i + 3] for i in range(0, len(compressed), 3)]
    out = b"".join(inflater.feed(piece) for piece in pieces[:-1])
    out += inflater.end_message(pieces[-1])
    assert out == STOMP * 20


def test_end_message_alone_ends_a_message_already_fed() -> None:
    compressed = Sender().message(STOMP)
    inflater = Inflater(no_context_takeover=False)
    assert inflater.feed(compressed) + inflater.end_message() == STOMP


def test_with_context_takeover_later_messages_use_the_carried_window() -> None:
    sender, inflater = Sender(), Inflater(no_context_takeover=False)
    first, second = sender.message(STOMP), sender.message(STOMP)
    assert len(second) < len(first) / 2  # the second is mostly a reference into the first
    assert inflater.end_message(first) == STOMP
    assert inflater.end_message(second) == STOMP


def test_without_context_takeover_every_message_starts_afresh() -> None:
    sender, inflater = Sender(no_context_takeover=True), Inflater(no_context_takeover=True)
    for _ in range(3):
        assert inflater.end_message(sender.message(STOMP)) == STOMP


def test_without_context_takeover_a_reference_to_the_last_message_fails() -> None:
    """A sender that kept its window although it agreed not to: its second message points back
    into a window the receiver has thrown away."""
    sender, inflater = Sender(), Inflater(no_context_takeover=True)
    assert inflater.end_message(sender.message(STOMP)) == STOMP
    with pytest.raises(InflateError, match="distance too far back") as failed:
        inflater.end_message(sender.message(STOMP))
    assert failed.value.__cause__ is None and failed.value.__suppress_context__


@pytest.mark.parametrize("window_bits", [9, 10, 12, 15])
def test_a_smaller_window_the_sides_agreed_on_inflates_with_the_15_bit_one(
    window_bits: int,
) -> None:
    sender = Sender(window_bits=window_bits)
    inflater = Inflater(no_context_takeover=False)
    text = bytes(range(256)) * 8 + STOMP * 30
    for _ in range(3):
        assert inflater.end_message(sender.message(text)) == text


def test_a_message_larger_than_a_piece_comes_out_whole() -> None:
    body = bytes(range(251)) * ((3 * MAX_PIECE) // 251 + 1)
    inflater = Inflater(no_context_takeover=False)
    assert inflater.end_message(Sender().message(body)) == body


def test_data_that_is_not_deflate_is_an_inflate_error() -> None:
    with pytest.raises(InflateError, match="invalid"):
        Inflater(no_context_takeover=True).end_message(b"\xff\xff\xff\xff")


def test_reset_starts_over_after_a_failure() -> None:
    inflater = Inflater(no_context_takeover=True)
    with pytest.raises(InflateError):
        inflater.feed(b"\xff\xff\xff\xff")
    inflater.reset()
    assert inflater.end_message(Sender().message(STOMP)) == STOMP


def test_a_message_inflating_beyond_the_bound_is_refused() -> None:
    """A compression bomb: 1 MiB of zeros compressed to about 1 KB, the block repeated (a full
    flush empties the window, so copies of it stay valid DEFLATE), fed in slices as the TCP
    stream brings them; the bound is checked across the feeds of one message."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    mebibyte = compressor.compress(bytes(1 << 20)) + compressor.flush(zlib.Z_FULL_FLUSH)
    bomb = mebibyte * ((MAX_MESSAGE >> 20) + 1)
    assert len(bomb) < MAX_MESSAGE // 1000  # a quarter of a megabyte on the wire
    inflater = Inflater(no_context_takeover=True)
    step = 4 * len(mebibyte)  # 4 MiB out of each feed
    inflated = 0
    with pytest.raises(InflateError, match=f"beyond {MAX_MESSAGE} bytes"):
        for start in range(0, len(bomb), step):
            inflated += len(inflater.feed(bomb[start : start + step]))
    assert inflated == MAX_MESSAGE  # every feed before the one that crossed it came out
    # the next message starts a new count (and, without context takeover, a new stream)
    inflater.reset()
    assert inflater.end_message(Sender().message(STOMP)) == STOMP


def test_an_unused_inflater_survives_pickling_with_its_setting() -> None:
    for no_context_takeover in (False, True):
        inflater = pickle.loads(pickle.dumps(Inflater(no_context_takeover)))
        assert inflater.no_context_takeover is no_context_takeover
        assert inflater.end_message(Sender().message(STOMP)) == STOMP


def test_a_used_inflater_without_context_takeover_goes_on_after_pickling() -> None:
    sender = Sender(no_context_takeover=True)
    inflater = Inflater(no_context_takeover=True)
    assert inflater.end_message(sender.message(STOMP)) == STOMP
    inflater = pickle.loads(pickle.dumps(inflater))
    assert inflater.end_message(sender.message(STOMP)) == STOMP


def test_a_used_inflater_with_context_takeover_says_its_window_was_lost() -> None:
    sender = Sender()
    inflater = Inflater(no_context_takeover=False)
    assert inflater.end_message(sender.message(STOMP)) == STOMP
    carried = pickle.loads(pickle.dumps(inflater))
    with pytest.raises(InflateError, match="window lost"):
        carried.end_message(sender.message(STOMP))
    # still lost when carried again, until a reset
    carried = pickle.loads(pickle.dumps(carried))
    with pytest.raises(InflateError, match="window lost"):
        carried.feed(b"")
    carried.reset()
    assert carried.end_message(Sender().message(STOMP)) == STOMP
