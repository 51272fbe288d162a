"""Carried state: a connection still open, as the state rows that take it to the next batch."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from pipeline.session import ModelOptions
from pipeline.session.rows import TableRow
from pipeline.spark import carried_state
from pipeline.spark.carried_state import CarriedChunks, StateReader, load_state
from pipeline.spark.flows import STATE_KIND, FlowPassConfig, FlowRunner
from pipeline.spark.pieces import PACKET_DTYPE, Piece, flow_key
from tests.pipeline.test_driver import CLIENT, LEFT_UNSETTLED, SERVER, Flow, _lagging_consumer
from tests.support.flow_rows import SunkRows

SPILLING = ModelOptions(max_pending_in_memory=5)
KEY = flow_key(*CLIENT, *SERVER)


def _records(flow: Flow, start: int, stop: int) -> np.ndarray:
    records = np.zeros(stop - start, dtype=PACKET_DTYPE)
    for index, (p, _payload) in enumerate(flow.packets[start:stop]):
        reverse = (p.src_ip, p.src_port) != min(CLIENT, SERVER)
        records[index] = (
            p.ts_ns, p.payload_offset, p.record_offset, p.seq, p.ack, p.payload_len,
            p.wire_len, p.window, p.flags, reverse, 0,
        )  # fmt: skip
    return records


def _runner(flow: Flow, held: SunkRows, *, close_open: bool) -> FlowRunner:
    config = FlowPassConfig((str(flow.path),), options=SPILLING, close_open=close_open)
    return FlowRunner(config, held)


def _tables(held: SunkRows) -> dict[str, list[TableRow]]:
    tables: dict[str, list[TableRow]] = {}
    for kind, rows, _keys in held.items():
        tables.setdefault(kind, []).extend(rows)
    return tables


def _sorted(rows: list[TableRow]) -> list[str]:
    return sorted(repr(sorted(dict(row).items())) for row in rows)


def _carried_halfway(flow: Flow) -> tuple[CarriedChunks, dict[str, list[TableRow]], int]:
    """The state of the lagging consumer after its first packets (some MESSAGEs spilled),
    the rows made until then, and where the rest of its packets start."""
    cut = len(flow.packets) - 12
    held = SunkRows()
    runner = _runner(flow, held, close_open=False)
    runner.feed_piece(Piece(KEY, 0, _records(flow, 0, cut)))
    runner.close()
    tables = _tables(held)
    (carried,) = tables.pop(STATE_KIND)
    return carried["state"], tables, cut


def test_spilled_rows_go_in_chunks_beside_the_pickle_and_resume_to_the_rows_of_one_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(carried_state, "CHUNK_BYTES", 300)
    flow = _lagging_consumer(tmp_path / "payloads", 120)
    whole = flow.run_as_pieces(options=SPILLING)
    state, first, cut = _carried_halfway(flow)
    chunks = list(state.chunks())
    (payload,) = state.payloads  # the spilled rows, outside the pickle
    assert payload.size > 20 * 300 and len(chunks) == 1 + -(-payload.size // 300)
    assert all(len(chunk) <= 300 for chunk in chunks[1:])
    assert len(chunks[0]) < payload.size  # the head holds records, not rows

    # the rows come one a batch, as Spark may cut them, before the flow's next packets
    held = SunkRows()
    runner = _runner(flow, held, close_open=True)
    rows = pa.RecordBatch.from_pydict(
        {
            "record_type": ["state"] * len(chunks),
            "flow_key": [KEY] * len(chunks),
            "state": chunks,
        }
    )
    for number in range(len(chunks)):
        runner.feed_batch(rows.slice(number, 1))
    runner.feed_piece(Piece(KEY, 0, _records(flow, cut, len(flow.packets))))
    runner.close()
    second = _tables(held)
    assert STATE_KIND not in second
    for name in (*LEFT_UNSETTLED, "frames"):
        both = first.get(name, []) + second.get(name, [])
        assert _sorted(both) == _sorted(whole.get(name, [])), name
    assert len(whole["messages"]) == 120


def test_a_state_without_new_packets_carries_its_spilled_rows_again_as_they_were(
    tmp_path: Path,
) -> None:
    flow = _lagging_consumer(tmp_path / "payloads", 40)
    flow.run_as_pieces(options=SPILLING)  # writes the payloads
    state, _first, _cut = _carried_halfway(flow)
    held = SunkRows()
    runner = _runner(flow, held, close_open=False)
    for chunk in state.chunks():
        runner.resume(KEY, chunk)
    runner.close()
    (again,) = _tables(held)[STATE_KIND]
    rows = list(state.chunks())[1:]
    assert rows and list(again["state"].chunks())[1:] == rows


def test_a_state_pickled_alone_keeps_its_spilled_rows(tmp_path: Path) -> None:
    flow = _lagging_consumer(tmp_path / "payloads", 40)
    flow.run_as_pieces(options=SPILLING)
    state, _first, _cut = _carried_halfway(flow)
    copy = pickle.loads(pickle.dumps(state))  # the payload's bytes inside the pickle
    assert list(copy.chunks()) == list(state.chunks())
    assert load_state(copy.chunks()) is not None


@pytest.mark.parametrize("cut", ["head", "payload"])
def test_state_rows_cut_short_are_refused_as_damaged(tmp_path: Path, cut: str) -> None:
    flow = _lagging_consumer(tmp_path / "payloads", 40)
    flow.run_as_pieces(options=SPILLING)
    state, _first, _cut = _carried_halfway(flow)
    chunks = list(state.chunks())
    reader = StateReader()
    if cut == "head":
        with pytest.raises(ValueError, match="damaged"):
            reader.add(chunks[0][:6])
        return
    for chunk in chunks[:-1]:
        reader.add(chunk)
    with pytest.raises(ValueError, match="damaged"):
        reader.load()
    reader.add(chunks[-1])
    with pytest.raises(ValueError, match="damaged"):
        reader.add(b"more")


def test_a_state_of_an_earlier_release_is_refused_as_incompatible() -> None:
    earlier = pickle.dumps(carried_state.CarriedState(None, version=8))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="incompatible"):
        load_state([earlier])
    with pytest.raises(pickle.UnpicklingError):
        load_state([b"not a pickle"])
