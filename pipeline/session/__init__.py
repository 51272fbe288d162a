"""STOMP session model: a connection's two byte streams in, analytics table rows out."""

from __future__ import annotations

from pipeline.session.model import SessionModel
from pipeline.session.options import Endpoint, ModelOptions

__all__ = ["Endpoint", "ModelOptions", "SessionModel"]
