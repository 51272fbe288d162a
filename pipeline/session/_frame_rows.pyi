from array import array
from collections.abc import Sequence
from typing import Any, overload

import pyarrow as pa

from pipeline.session.rows import Body

INT64_COLUMNS: tuple[str, ...]
OFFSET_LIMIT: int

class HeaderPairs(Sequence[Any]):
    as_dicts: bool
    def __init__(self, as_dicts: bool = False) -> None: ...
    def arrow(self, type_: pa.DataType) -> pa.Array: ...
    def __len__(self) -> int: ...
    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Any]: ...

class FrameColumns:
    @property
    def columns(self) -> tuple[list[Any] | array[int] | HeaderPairs, ...]: ...
    regular: bool
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
    ) -> None: ...
    def add_columns(self, other: FrameColumns) -> None: ...
    def __len__(self) -> int: ...
