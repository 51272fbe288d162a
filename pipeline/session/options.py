"""Configuration of the session model and the connection endpoints it describes."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.net import Endpoint

__all__ = ["BODY_MODES", "Endpoint", "ModelOptions"]

BODY_MODES: frozenset[str] = frozenset({"hash", "preview", "full"})


@dataclass(slots=True, frozen=True)
class ModelOptions:
    body_mode: str = "hash"  # "hash" | "preview" | "full"
    preview_bytes: int = 0
    login_hash_key: bytes | None = None  # set => login replaced by hmac-sha256(key, login) hex
    late_thresholds: tuple[float, ...] = (1.0, 1.5, 2.0)  # -> late_1x, late_1_5x, late_2x
    lenient: bool = False  # decoder accepts the early protocol form (see pipeline.stomp)
    max_pending_messages: int = 10_000  # unsettled MESSAGEs kept per connection before giving up
    # and the memory they may hold per connection (`deliveries.held_bytes`): with full bodies or
    # previews of large messages, the count alone would bound nothing
    max_pending_bytes: int = 64 << 20

    def __post_init__(self) -> None:
        if self.body_mode not in BODY_MODES:
            raise ValueError(f"body_mode must be one of {sorted(BODY_MODES)}: {self.body_mode!r}")
        if self.preview_bytes < 0:
            raise ValueError("preview_bytes must be >= 0")
        if self.max_pending_messages < 1:
            raise ValueError("max_pending_messages must be >= 1")
        if self.max_pending_bytes < 1:
            raise ValueError("max_pending_bytes must be >= 1")
