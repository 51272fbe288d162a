"""stomp-lake: STOMP traffic capture and analytics on Spark and Delta Lake."""

# Before any module of the package is imported: the modules compiled from their own source are
# imported as source under STOMP_LAKE_PURE_PYTHON=1 or, in a source checkout, when their build
# is stale.
from pipeline.compiled import install_source_finder

install_source_finder()

# Any process importing the package drains Arrow's thread pools before interpreter teardown.
import pipeline.process  # noqa: E402, F401
