from __future__ import annotations

import random
import tracemalloc

import pytest

from pipeline.compiled import built
from pipeline.session.key_index import (
    SLOT_SPAN,
    PythonKeyIndex,
    key_hash,
    new_key_index,
    slot_near,
)

compiled = built("key_index")
needs_build = pytest.mark.skipif(compiled is None, reason="the compiled kernel is not built")


def _indexes() -> list[PythonKeyIndex]:
    indexes: list[PythonKeyIndex] = [PythonKeyIndex()]
    if compiled is not None:
        indexes.append(compiled.KeyIndex())
    return indexes


@pytest.mark.parametrize("seed", range(3))
def test_the_twins_answer_alike_through_adds_removes_and_growth(seed: int) -> None:
    rng = random.Random(seed)
    indexes = _indexes()
    # few distinct hashes (one in eight colliding with another) and many slots
    hashes = [rng.getrandbits(64) for _ in range(400)] + [0, (1 << 64) - 1]
    live: list[tuple[int, int]] = []
    for slot in range(6_000):
        if live and rng.random() < 0.45:
            hash_, old = live.pop(rng.randrange(len(live)))
            assert [index.remove(hash_, old) for index in indexes] == [True] * len(indexes)
            assert [index.remove(hash_, old) for index in indexes] == [False] * len(indexes)
        hash_ = rng.choice(hashes)
        for index in indexes:
            index.add(hash_, slot)
        live.append((hash_, slot))
        probe = rng.choice(hashes)
        answers = [sorted(index.candidates(probe)) for index in indexes]
        assert answers == [sorted(s for h, s in live if h == probe)] * len(indexes)
    assert [len(index) for index in indexes] == [len(live)] * len(indexes)


@needs_build
def test_the_compiled_index_refuses_a_negative_slot_and_pickling() -> None:
    import pickle

    assert compiled is not None
    index = compiled.KeyIndex()
    with pytest.raises(ValueError):
        index.add(1, -1)
    with pytest.raises(TypeError):
        pickle.dumps(index)


@needs_build
def test_the_compiled_index_is_the_one_made_unless_pure_python_is_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert compiled is not None
    assert type(new_key_index()) is compiled.KeyIndex
    monkeypatch.setenv("STOMP_LAKE_PURE_PYTHON", "1")
    assert type(new_key_index()) is PythonKeyIndex


def test_a_key_hash_is_64_bits_and_stable_within_the_process() -> None:
    assert 0 <= key_hash("message-1") < 1 << 64
    assert key_hash("message-1") == key_hash("".join(["message-", "1"]))


def test_slots_are_held_modulo_the_span_and_mapped_back_near_the_oldest() -> None:
    for index in _indexes():
        index.add(7, SLOT_SPAN + 5)
        index.add(7, SLOT_SPAN - 1)
        assert sorted(index.candidates(7)) == [5, SLOT_SPAN - 1]
        assert index.remove(7, SLOT_SPAN + 5) and index.candidates(7) == [SLOT_SPAN - 1]
        with pytest.raises(ValueError):
            index.add(7, -1)
    first = 3 * SLOT_SPAN - 2  # the oldest slot in the index; the newest is past a span's end
    assert slot_near((first + 1) % SLOT_SPAN, first) == first + 1
    assert slot_near((first + 9) % SLOT_SPAN, first) == first + 9


@needs_build
def test_a_large_compiled_index_is_mapped_shown_to_tracemalloc_and_given_back() -> None:
    assert compiled is not None
    rng = random.Random(1)
    count = 300_000  # 8-byte entries in an array of 2**19: 4 MiB, mapped on its own
    hashes = [rng.getrandbits(64) for _ in range(count)]
    tracemalloc.start()
    try:
        index = compiled.KeyIndex()
        for slot, hash_ in enumerate(hashes):
            index.add(hash_, slot)
        held, _ = tracemalloc.get_traced_memory()
        assert 8 * count < held < 16 * count, held / count
        assert all(index.candidates(hashes[n]) == [n] for n in range(0, count, 997))
        del index
        left, _ = tracemalloc.get_traced_memory()
        assert left < held / 100
    finally:
        tracemalloc.stop()
