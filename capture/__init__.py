"""stomp-capture: a recording TCP proxy for STOMP traffic (see capture.cli)."""
