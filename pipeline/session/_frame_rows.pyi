from array import array
from typing import Any

from pipeline.session._arrow_columns import Column, HeaderPairs
from pipeline.session.rows import Body

INT64_COLUMNS: tuple[str, ...]

class FrameColumns:
    @property
    def columns(self) -> tuple[list[Any] | array[int] | Column | HeaderPairs, ...]: ...
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
