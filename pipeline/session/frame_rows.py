"""The frames table's rows held as columns, one list per column, as frames are decoded.

A frames row per decoded frame was a dict, converted to Arrow field by field when written: with
the writing, a fifth of the flow pass. Here a frame appends its values to the lists
(`FrameColumns.add`), and the writer turns each list into an Arrow array at once
(`pipeline.spark.arrow_rows`). ``_frame_rows.pyx`` is the compiled twin of `FrameColumns`.

Read as a sequence, the rows are dicts with the columns of ``schemas/tables/frames.json`` but
``batch_id``, as the other tables' rows are.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, overload

from pipeline.compiled import built, kernel
from pipeline.session.clock import to_datetime
from pipeline.session.rows import Body, Row, TableRow

# Held per frame, in this order; ``ts``, ``ts_end`` and ``date`` are made from the two times.
FRAME_COLUMNS: tuple[str, ...] = (
    "session_id",
    "direction",
    "frame_index",
    "ts_ns",
    "ts_end_ns",
    "command",
    "headers",
    "header_list",
    "content_length",
    "body_length",
    "body_sha256",
    "body_preview",
    "body",
    "stream_offset",
    "frame_length",
    "tcp_offset",
    "violation",
)


def headers_follow_list(headers: dict[str, str], header_list: list[tuple[str, str]]) -> bool:
    """Whether ``headers`` holds exactly the entries of ``header_list``, in its order (no name
    repeated): the writer then makes the headers map from the header list's arrays."""
    if type(headers) is not dict or type(header_list) is not list:  # noqa: E721 - exact types
        return False
    return len(headers) == len(header_list) and all(
        type(pair) is tuple and entry == pair  # noqa: E721
        for entry, pair in zip(headers.items(), header_list, strict=True)
    )


class FrameColumns:
    """The reference: a frame's values appended to each column's list."""

    __slots__ = ("columns", "regular")

    def __init__(self) -> None:
        self.columns: tuple[list[Any], ...] = tuple([] for _ in FRAME_COLUMNS)
        # every frame's headers follow its header list (see headers_follow_list)
        self.regular = True

    def add(
        self,
        session_id: str,
        direction: str,
        frame_index: int,
        ts_ns: int,
        ts_end_ns: int,
        command: str,
        headers: dict[str, str],
        header_list: list[tuple[str, str]],
        content_length: int | None,
        body: Body,
        stream_offset: int,
        frame_length: int,
        tcp_offset: int,
        violation: str | None,
    ) -> None:
        values = (
            session_id,
            direction,
            frame_index,
            ts_ns,
            ts_end_ns,
            command,
            headers,
            header_list,
            content_length,
            *body,
            stream_offset,
            frame_length,
            tcp_offset,
            violation,
        )
        for column, value in zip(self.columns, values, strict=True):
            column.append(value)
        if self.regular and not headers_follow_list(headers, header_list):
            self.regular = False

    def add_columns(self, other: FrameColumns) -> None:
        for mine, theirs in zip(self.columns, other.columns, strict=True):
            mine.extend(theirs)
        self.regular = self.regular and other.regular

    def __len__(self) -> int:
        return len(self.columns[0])


if TYPE_CHECKING:  # the rows are held by either twin: the reference types them
    _Columns = FrameColumns
else:
    _Columns = object


class FrameRows(_Columns):
    """What the two twins share: the rows as a sequence of dicts (tests, the local driver),
    rows added as dicts, and the columns by name."""

    __slots__ = ()

    def column(self, name: str) -> list[Any]:
        return self.columns[_POSITION[name]]

    def append(self, row: TableRow) -> None:
        """A row given as a dict (made outside the session model)."""
        self.add(
            row["session_id"],
            row["direction"],
            row["frame_index"],
            row["ts_ns"],
            row["ts_end_ns"],
            row["command"],
            row["headers"],
            row["header_list"],
            row["content_length"],
            (row["body_length"], row["body_sha256"], row["body_preview"], row["body"]),
            row["stream_offset"],
            row["frame_length"],
            row["tcp_offset"],
            row["violation"],
        )

    def extend(self, rows: Iterable[TableRow]) -> None:
        if isinstance(rows, FrameRows):
            self.add_columns(rows)
            return
        for row in rows:
            self.append(row)

    def __iter__(self) -> Iterator[Row]:
        for values in zip(*self.columns, strict=True):
            yield _row(values)

    @overload
    def __getitem__(self, index: int) -> Row: ...

    @overload
    def __getitem__(self, index: slice) -> list[Row]: ...

    def __getitem__(self, index: int | slice) -> Row | list[Row]:
        if isinstance(index, slice):
            return list(self)[index]
        return _row(tuple(column[index] for column in self.columns))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrameRows | list):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, as a list

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self)!r})"


_POSITION = {name: i for i, name in enumerate(FRAME_COLUMNS)}


def _row(values: tuple[Any, ...]) -> Row:
    row = dict(zip(FRAME_COLUMNS, values, strict=True))
    ts, ts_end = to_datetime(row["ts_ns"]), to_datetime(row["ts_end_ns"])
    return {
        "session_id": row["session_id"],
        "direction": row["direction"],
        "frame_index": row["frame_index"],
        "ts": ts,
        "ts_ns": row["ts_ns"],
        "ts_end": ts_end,
        "ts_end_ns": row["ts_end_ns"],
        **{name: row[name] for name in FRAME_COLUMNS[5:]},
        "date": ts.date(),
    }


class PythonFrameRows(FrameRows, FrameColumns):
    __slots__ = ()


_compiled = built("frame_rows")

if TYPE_CHECKING:  # the twin is typed as the reference
    CompiledFrameRows = PythonFrameRows
elif _compiled is not None:

    class CompiledFrameRows(FrameRows, _compiled.FrameColumns):
        __slots__ = ()


def new_frame_rows() -> FrameRows:
    """Empty rows of the compiled twin, or of the reference (not built, or pure Python asked
    for when the rows are made)."""
    if _compiled is not None and kernel("frame_rows") is not None:
        return CompiledFrameRows()
    return PythonFrameRows()


TableRows = list[TableRow] | FrameRows  # a table's rows, as a drain hands them over
