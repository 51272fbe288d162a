"""fuzz/twins.py: the package's pure-Python twin beside the compiled package."""

from __future__ import annotations

import os
import sys

from fuzz import twins
from pipeline.compiled import PURE_PYTHON_VARIABLE, is_compiled


def test_the_twin_is_pure_python_and_the_package_is_left_as_it_was() -> None:
    import pipeline.stomp.decoder as decoder

    before = dict(sys.modules)
    (twin,) = twins.pure("pipeline.stomp.decoder")
    assert twin is not decoder
    assert not is_compiled(twin)
    assert sys.modules["pipeline.stomp.decoder"] is decoder
    assert {name: sys.modules.get(name) for name in before} == before
    assert os.environ.get(PURE_PYTHON_VARIABLE) is None


def test_running_pure_gives_the_twin_its_own_modules_by_name() -> None:
    import pipeline.session.streams as streams

    (twin,) = twins.pure("pipeline.session.streams")
    with twins.running_pure():
        assert sys.modules["pipeline.session.streams"] is twin
        assert not is_compiled(twin)
    assert sys.modules["pipeline.session.streams"] is streams


def test_the_twin_decodes_as_the_package_does() -> None:
    import pipeline.stomp as stomp

    (twin,) = twins.pure("pipeline.stomp")
    stream = b"CONNECT\naccept-version:1.2\n\n\x00\nSEND\ndestination:/q\n\nbody\x00"
    frames = []
    for package in (stomp, twin):
        decoder = package.Decoder("1.2")
        decoder.feed(stream)
        events = []
        while (event := decoder.next_event()) is not package.NEED_DATA:
            events.append(event)
        frames.append([(type(e).__name__, getattr(e, "command", None)) for e in events])
    assert frames[0] == frames[1]
    assert [command for _, command in frames[0]] == ["CONNECT", None, "SEND"]
