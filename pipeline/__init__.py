"""stomp-lake: STOMP traffic capture and analytics on Spark and Delta Lake."""
