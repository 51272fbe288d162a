from __future__ import annotations

import os
import pickle
import random
import tracemalloc
from typing import Any

import pytest

from pipeline.compiled import kernel
from pipeline.session import ModelOptions, SessionModel
from pipeline.session.key_index import SLOT_SPAN
from pipeline.session.message_rows import message_row
from pipeline.session.spilled import SPILLED_BYTES, WRITE_BYTES, SpilledDeliveries
from tests.pipeline.session.conversation import CLIENT, SERVER, Conversation, replay


def _row(frame_index: int) -> Any:
    headers = {"message-id": f"m{frame_index}", "subscription": "0", "destination": "/q"}
    body = (0, None, None, None)
    return message_row("s1", "s2c", frame_index, "MESSAGE", headers, body, 0, "client")


def test_spilled_messages_are_found_by_their_keys_and_taken_back_whole() -> None:
    spilled = SpilledDeliveries()
    for n in range(5):
        spilled.add(10 + n, 1000 + n, n % 2, (f"a{n}", f"m{n}"), 100 + n, _row(10 + n))
    assert len(spilled) == 5 and spilled.held_bytes == 5 * SPILLED_BYTES
    slot = spilled.find("m3")
    assert slot == spilled.find("a3") and spilled.frame_index(slot) == 13
    assert spilled.delivered_ns(slot) == 1003 and spilled.subscription(slot) == 1
    assert spilled.find("nothing") == -1
    spilled.drop_key("a3")  # a later MESSAGE took the key
    assert spilled.find("a3") == -1 and spilled.find("m3") == slot
    keys, held, row = spilled.read(slot)
    assert keys == ("m3",) and row.frame_index == 13 and held == 103
    spilled.take(slot)
    assert spilled.find("m3") == -1 and spilled.count(1) == 1
    assert [spilled.frame_index(s) for s in spilled.through(0, None)] == [10, 12, 14]
    assert spilled.oldest() == 0
    for s in spilled.slots():
        spilled.take(s)
    assert len(spilled) == 0 and spilled.oldest() == -1


def test_a_cumulative_range_stops_at_the_named_slot_and_skips_other_subscriptions() -> None:
    spilled = SpilledDeliveries()
    for n in range(6):
        spilled.add(n, n, n % 3, (f"m{n}",), 1, _row(n))
    last = spilled.find("m3")
    assert [spilled.frame_index(s) for s in spilled.through(0, last)] == [0, 3]


def test_spilled_messages_are_carried_with_their_keys_as_they_stand() -> None:
    spilled = SpilledDeliveries()
    for n in range(4):
        spilled.add(n, n, 0, (f"a{n}", f"m{n}"), 7, _row(n))
    spilled.take(spilled.find("m0"))
    spilled.drop_key("a2")
    carried = pickle.loads(pickle.dumps(spilled))
    assert len(carried) == 3 and carried.find("a2") == -1
    assert carried.frame_index(carried.find("m2")) == 2
    assert [carried.frame_index(s) for s in carried.slots()] == [1, 2, 3]


def test_a_carried_message_keeps_the_bytes_it_was_spilled_as() -> None:
    spilled = SpilledDeliveries()
    spilled.add(1, 1, 0, ("a1", "m1"), 7, _row(1))
    spilled.drop_key("a1")
    blob = spilled._blob(0)  # noqa: SLF001
    carried = pickle.loads(pickle.dumps(spilled))
    assert carried._blob(0) == blob  # noqa: SLF001 - not unpickled and pickled again
    assert carried.read(0)[:2] == (("m1",), 7) and carried.find("a1") == -1


def test_rows_are_taken_oldest_first_a_part_at_a_time_and_the_file_goes_with_the_last() -> None:
    spilled = SpilledDeliveries()
    for n in range(10):
        spilled.add(n, n, 0, (f"m{n}",), 1, _row(n))
    spilled.take(spilled.find("m1"))
    assert [row.frame_index for row in spilled.take_rows(4)] == [0, 2, 3, 4]
    assert len(spilled) == 5 and spilled.oldest() == 5
    assert [row.frame_index for row in spilled.take_rows(4)] == [5, 6, 7, 8]
    assert [row.frame_index for row in spilled.take_rows(4)] == [9]
    assert len(spilled) == 0 and spilled._file is None  # noqa: SLF001
    assert spilled.take_rows(4) == []


def _unacked(count: int, *, in_memory: int, mode: str) -> Conversation:
    """``count`` MESSAGEs to one subscription in ``mode``, none of them acked yet."""
    talk = Conversation(ModelOptions(max_pending_in_memory=in_memory))
    talk.handshake()
    talk.subscribe(5, "0", mode)
    for n in range(count):
        talk.message(10 + n, "0", f"m{n}", ack=f"a{n}")
    return talk


def test_a_connection_over_with_spilled_messages_pickles_before_its_rows_are_drained() -> None:
    talk = _unacked(10, in_memory=3, mode="client")
    talk.model.finish(100)
    first = talk.model.drain(4)["messages"]
    carried = pickle.loads(pickle.dumps(talk.model))
    assert carried.rows_left
    rest = carried.drain()["messages"]
    assert not carried.rows_left
    assert [m["message_id"] for m in [*first, *rest]] == [f"m{n}" for n in range(10)]
    assert {m["ack_outcome"] for m in [*first, *rest]} == {"none"}


def test_the_file_is_rewritten_without_settled_rows_and_dropped_when_empty(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("pipeline.session.spilled.REWRITE_AFTER", 1)
    spilled = SpilledDeliveries()
    for n in range(10_000):
        spilled.add(n, n, 0, (f"m{n}",), 1, _row(n))
    for n in range(0, 10_000, 2):
        spilled.take(spilled.find(f"m{n}"))
    assert spilled._settled_bytes < spilled._end  # noqa: SLF001 - rewritten
    assert [spilled.frame_index(s) for s in spilled.slots()][:3] == [1, 3, 5]
    assert spilled.read(spilled.find("m9999"))[2].message_id == "m9999"
    for slot in spilled.slots():
        spilled.take(slot)
    assert spilled._file is None  # noqa: SLF001


def test_rows_go_to_the_file_a_buffer_at_a_time_and_are_read_from_either() -> None:
    spilled = SpilledDeliveries()
    count = 0
    while spilled._written == 0:  # noqa: SLF001 - the buffer is the point
        spilled.add(count, count, 0, (f"m{count}",), 1, _row(count))
        count += 1
    file = spilled._file  # noqa: SLF001
    assert file is not None and os.fstat(file.fileno()).st_size == spilled._written >= WRITE_BYTES  # noqa: SLF001
    for n in range(count, count + 5):  # these stay in the buffer
        spilled.add(n, n, 0, (f"m{n}",), 1, _row(n))
    assert spilled._written < spilled._end  # noqa: SLF001
    for one in (spilled, pickle.loads(pickle.dumps(spilled))):  # carried with the buffer's rows
        assert [one.read(one.find(f"m{n}"))[2].frame_index for n in range(count + 5)] == list(
            range(count + 5)
        )
    spilled.close()


def test_spilled_messages_are_found_when_their_slots_pass_the_index_span() -> None:
    spilled = SpilledDeliveries()
    spilled._base = spilled._head = SLOT_SPAN - 2  # noqa: SLF001 - a long connection's slots
    for n in range(5):
        spilled.add(n, n, 0, (f"a{n}",), 100, _row(n))
    assert [spilled.frame_index(spilled.find(f"a{n}")) for n in range(5)] == list(range(5))
    assert spilled.find("a4") == SLOT_SPAN + 2
    spilled.take(spilled.find("a0"))
    assert spilled.find("a0") == -1 and spilled.find("a3") == SLOT_SPAN + 1
    spilled.close()


def test_a_spilled_message_holds_at_most_eighty_bytes_of_memory() -> None:
    if kernel("key_index") is None:
        pytest.skip("the compiled index is not built, or pure Python is asked for")
    count = 100_000
    rows = [_row(n) for n in range(1000)]
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    spilled = SpilledDeliveries()
    for n in range(count):
        spilled.add(n, n, 0, (f"ack-{n:020d}", f"message-{n:020d}"), 2048, rows[n % 1000])
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    held = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    assert held / count <= SPILLED_BYTES, held / count
    spilled.close()


def _lagging_consumer(seed: int) -> Conversation:
    """Two subscriptions (cumulative and individual) whose consumer acks late, out of order,
    twice, before delivery, names nothing, or never; message-ids delivered twice; one
    subscription replaced and one unsubscribed while MESSAGEs of theirs are unsettled."""
    rng = random.Random(seed)
    talk = Conversation()
    talk.handshake()
    talk.subscribe(1, "c", "client")
    talk.subscribe(2, "i", "client-individual", dest="/queue/b")
    delivered: list[tuple[str, str]] = []
    ms = 10.0
    for n in range(400):
        ms += 1
        if rng.random() < 0.6:
            sub = rng.choice("ci")
            message_id = f"m{rng.randrange(n + 1) if rng.random() < 0.05 else n}"
            dest = "/queue/a" if sub == "c" else "/queue/b"
            talk.message(ms, sub, message_id, ack=f"a{n}", dest=dest)
            delivered.append((sub, f"a{n}"))
        elif delivered and rng.random() < 0.85:
            _, ack = delivered[rng.randrange(len(delivered))]  # the lagging and the prompt
            talk.client(ms, rng.choice(["ACK", "ACK", "NACK"]), [("id", ack)])
        else:
            talk.client(ms, "ACK", [("id", f"a{n + 5}")])  # names one not delivered yet
        if n == 250:
            talk.subscribe(ms, "i", "client-individual", dest="/queue/c")  # replaces "i"
        if n == 300:
            talk.client(ms, "UNSUBSCRIBE", [("id", "c")])
    talk.finish(ms + 100, "capture_end")
    return talk


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("in_memory", [1, 3, 40])
@pytest.mark.parametrize("pickle_every", [0, 37])
def test_spilling_changes_no_row_of_a_lagging_consumer(
    seed: int, in_memory: int, pickle_every: int
) -> None:
    talk = _lagging_consumer(seed)
    kept = ModelOptions(max_pending_messages=50)
    spilling = ModelOptions(max_pending_messages=50, max_pending_in_memory=in_memory)
    _, expected = replay(talk.script, SessionModel("s1", CLIENT, SERVER, kept))
    _, rows = replay(
        talk.script, SessionModel("s1", CLIENT, SERVER, spilling), pickle_every=pickle_every
    )
    assert any(a["kind"] == "pending_overflow" for a in expected["anomalies"])
    for table in expected:
        assert [dict(r) for r in rows[table]] == [dict(r) for r in expected[table]], table


def test_a_consumer_past_the_rows_kept_in_memory_spills_them_and_resumes() -> None:
    talk = _unacked(100, in_memory=10, mode="client-individual")
    ledger = talk.model._protocol.ledger
    assert len(ledger.pending) == 10 and len(ledger.spilled) == 90
    assert ledger.pending_bytes() < ledger.held_bytes + 90 * SPILLED_BYTES + 1
    talk.client(200, "ACK", [("id", "a3")])  # a spilled one
    talk.client(201, "ACK", [("id", "a95")])  # one in memory
    rows = talk.finish(300)
    outcomes = {m["message_id"]: m["ack_outcome"] for m in rows["messages"]}
    assert outcomes["m3"] == outcomes["m95"] == "ACK"
    assert sum(o == "none" for o in outcomes.values()) == 98
    assert [a["kind"] for a in rows["anomalies"]] == []
    assert rows["subscriptions"][0]["messages_unacked"] == 98
    assert rows["sessions"][0]["unacked_messages"] == 98


def test_a_ledger_carried_by_an_earlier_release_starts_with_nothing_spilled() -> None:
    talk = Conversation()
    talk.handshake()
    talk.subscribe(5, "0", "client")
    talk.message(10, "0", "m1", ack="a1")
    ledger = talk.model._protocol.ledger
    none, state = ledger.__getstate__()
    older = {k: v for k, v in state.items() if k not in ("spilled", "spilled_subscriptions")}
    carried = type(ledger).__new__(type(ledger))
    carried.__setstate__((none, older))
    assert len(carried.spilled) == 0 and carried.spilled_subscriptions == []
    assert carried.pending_count() == 1
