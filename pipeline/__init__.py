"""stomp-lake: STOMP traffic capture and analytics on Spark and Delta Lake."""

# Any process importing the package drains Arrow's thread pools before interpreter teardown.
import pipeline.process  # noqa: F401
