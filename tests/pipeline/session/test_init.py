from __future__ import annotations

import pipeline.session as session
from schemas import TABLES


def test_public_api() -> None:
    assert set(session.__all__) == {"Endpoint", "ModelOptions", "SessionModel"}
    model = session.SessionModel("id", session.Endpoint("a", 1), session.Endpoint("b", 2))
    assert set(model.drain()) == set(TABLES)
