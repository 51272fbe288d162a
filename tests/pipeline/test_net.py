"""pipeline/net.py: the one direction type (the tables' value, the capture proxy's per-direction
state) and the flow key both directions of a connection share."""

from __future__ import annotations

from pipeline.net import Direction, Endpoint, flow_key, key_ends


def test_a_direction_is_named_by_its_sender_and_stored_as_its_value() -> None:
    assert Direction.of(from_client=True) is Direction.C2S
    assert Direction.of(from_client=False) is Direction.S2C
    assert (Direction.C2S.side, Direction.S2C.side) == ("client", "server")
    assert [f"{d}" for d in Direction] == ["c2s", "s2c"]
    assert Direction("s2c") is Direction.S2C and Direction.C2S == "c2s"


def test_the_reverse_of_a_direction_is_the_other_one_and_back() -> None:
    assert Direction.C2S.reverse is Direction.S2C
    assert Direction.S2C.reverse is Direction.C2S
    for direction in Direction:
        assert direction.reverse.reverse is direction
        assert direction.reverse.side != direction.side


def test_both_directions_of_a_connection_have_one_flow_key() -> None:
    key = flow_key("10.0.0.9", 61613, "10.0.0.1", 40000)
    assert key == flow_key("10.0.0.1", 40000, "10.0.0.9", 61613) == "10.0.0.1|40000|10.0.0.9|61613"
    assert key_ends(key) == ("10.0.0.1", 40000, "10.0.0.9", 61613)
    assert key_ends(flow_key("::1", 5, "::1", 4)) == ("::1", 4, "::1", 5)


def test_an_endpoint_prints_as_an_address_and_port() -> None:
    assert str(Endpoint("10.0.0.1", 61613)) == "10.0.0.1:61613"
    assert str(Endpoint("fe80::1", 61613)) == "[fe80::1]:61613"
