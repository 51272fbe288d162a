"""Configuration of the session model and the connection endpoints it describes."""

from __future__ import annotations

from dataclasses import dataclass, fields

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
    # unsettled MESSAGEs kept per connection before the oldest is given up (`pending_overflow`)
    max_pending_messages: int = 1_000_000
    # and the memory they may hold per connection (`DeliveryLedger.pending_bytes`): with full
    # bodies or previews of large messages, the count alone would bound nothing. A million
    # small ones fit: 10,000 rows in memory, the rest spilled at 80 bytes each
    max_pending_bytes: int = 160 << 20
    # of them, how many keep their rows in memory: the rows of older ones are spilled to disk,
    # a record of 80 bytes each left in memory (`pipeline.session.spilled`), their rows read
    # back a batch at a time when the connection ends, and carried to the next run beside its
    # state (`pipeline.spark.carried_state`)
    max_pending_in_memory: int = 10_000

    def __post_init__(self) -> None:
        if self.body_mode not in BODY_MODES:
            raise ValueError(f"body_mode must be one of {sorted(BODY_MODES)}: {self.body_mode!r}")
        if self.preview_bytes < 0:
            raise ValueError("preview_bytes must be >= 0")
        if self.max_pending_messages < 1:
            raise ValueError("max_pending_messages must be >= 1")
        if self.max_pending_bytes < 1:
            raise ValueError("max_pending_bytes must be >= 1")
        if self.max_pending_in_memory < 1:
            raise ValueError("max_pending_in_memory must be >= 1")


def _setstate(options: ModelOptions, state: list[object]) -> None:
    """Options carried with a connection by an earlier release have fewer fields: the rest
    take their defaults. (A frozen dataclass with slots gets dataclasses' own, which leaves
    them unset; it is replaced after the class is made.)"""
    known = fields(options)
    for field_, value in zip(known, state, strict=False):
        object.__setattr__(options, field_.name, value)
    for field_ in known[len(state) :]:
        object.__setattr__(options, field_.name, field_.default)


ModelOptions.__setstate__ = _setstate  # type: ignore[attr-defined]
