from typing import Any

import pyarrow as pa

class MessageSlots:
    @classmethod
    def make(
        cls,
        session_id: str,
        direction: str,
        frame_index: int,
        command: str,
        headers: dict[str, str],
        body: tuple[int, str | None, str | None, bytes | None],
        ts_ns: int,
        ack_mode: str | None,
    ) -> Any: ...
    @staticmethod
    def columns(rows: list[Any]) -> tuple[list[Any], ...]: ...
    @staticmethod
    def arrays(rows: list[Any], types: tuple[pa.DataType, ...]) -> list[pa.Array]: ...

class AckSlots:
    @classmethod
    def make(
        cls,
        session_id: str,
        frame_index: int,
        command: str,
        headers: dict[str, str],
        ack_id: str | None,
        ts_ns: int,
    ) -> Any: ...
    @staticmethod
    def columns(rows: list[Any]) -> tuple[list[Any], ...]: ...
    @staticmethod
    def arrays(rows: list[Any], types: tuple[pa.DataType, ...]) -> list[pa.Array]: ...
