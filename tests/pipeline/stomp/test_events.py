"""Frames decode headers lazily, compare by value, pickle, and hide passcodes in repr."""

from __future__ import annotations

import pickle

from pipeline.stomp import Frame, HeartBeat, Violation
from pipeline.stomp.events import heartbeat, undecoded_frame


def lazy_frame(raw: bytes, version: str = "1.2") -> Frame:
    return undecoded_frame("SEND", raw, 5, version, False, b"body", 0, 20, None)


def test_lazy_frame_equals_its_eager_twin() -> None:
    eager = Frame("SEND", [("a", "x:y"), ("a", "2")], b"body", 0, 20)
    assert lazy_frame(b"a:x\\cy\na:2") == eager
    assert lazy_frame(b"a:x\\cy\na:2") != lazy_frame(b"a:x\\cy\na:3")


def test_headers_first_wins_and_get() -> None:
    frame = lazy_frame(b"a:1\nb:2\na:3")
    assert frame.headers == {"a": "1", "b": "2"}
    assert frame.get("a") == "1"
    assert frame.get("zz") is None
    assert frame.get("zz", "d") == "d"


def test_violations_found_while_decoding_join_the_framing_ones_in_offset_order() -> None:
    early = Violation("unknown_command", 0)
    late = Violation("unexpected_body", 99)
    frame = undecoded_frame("X", b"a:\\q", 5, "1.2", False, b"b", 0, 20, None, [early, late])
    assert [v.kind for v in frame.violations] == ["unknown_command", "undefined_escape",
                                                  "unexpected_body"]
    assert isinstance(frame.violations, tuple)


def test_frames_pickle_decoded_or_not() -> None:
    frame = lazy_frame(b"a:1")
    assert pickle.loads(pickle.dumps(frame)) == frame
    frame.headers  # noqa: B018 - decode, then pickle again
    assert pickle.loads(pickle.dumps(frame)) == frame


def test_repr_hides_the_passcode() -> None:
    frame = Frame("CONNECT", [("login", "bob"), ("passcode", "s3cret")])
    assert "s3cret" not in repr(frame)
    assert "bob" in repr(frame)


def test_repr_hides_a_passcode_whatever_the_case_of_its_name() -> None:
    frame = Frame("SEND", [("Passcode", "s3cret"), ("PASSCODE", "t0p")])
    assert "s3cret" not in repr(frame) and "t0p" not in repr(frame)


def test_heartbeat_factory_builds_real_heartbeats() -> None:
    assert heartbeat(7, 2) == HeartBeat(offset=7, length=2)
    assert hash(heartbeat(7)) == hash(HeartBeat(7))
