"""A connection still open at the end of a batch, as bytes for the next batch to resume."""

from __future__ import annotations

import pickle
from dataclasses import dataclass

from pipeline.driver import DriverState

STATE_VERSION = 8  # 1: pipeline.flows.FlowState, before the connection driver; 2: eager stamps;
# 3: messages and acks rows as dicts; 5: the WebSocket transport's bound on held bytes and the
# de-framer's count of messages skipped after an inflate failure; 6: the model's TLS facts;
# 7: streams, chunks and message rows of one class each, compiled from their source; 8: a TLS
# connection's record offsets (pipeline.tls.offsets), shared with its model


@dataclass(slots=True)
class CarriedState:
    driver: DriverState
    version: int = STATE_VERSION


def dump_state(state: DriverState) -> bytes:
    return pickle.dumps(CarriedState(state), protocol=5)


def load_state(blob: bytes) -> DriverState:
    try:
        carried = pickle.loads(blob)
    except (ImportError, AttributeError) as error:  # classes of another release
        raise ValueError(_INCOMPATIBLE) from error
    if not isinstance(carried, CarriedState) or carried.version != STATE_VERSION:
        raise ValueError(_INCOMPATIBLE)
    return carried.driver


_INCOMPATIBLE = (
    "carried connection state from an incompatible version of stomp-lake: close the open "
    "connections with the release that carried them (--open-connections close), then upgrade"
)
