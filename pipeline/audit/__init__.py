"""Ad-hoc SQL and saved traffic-audit queries over the lake's tables.

`views.register_views` makes every table a Spark view; `registry` holds the saved queries
(`queries/*.sql`); `output` prints results as a table, CSV or JSON; `prompt` is the interactive
SQL prompt.
"""

from __future__ import annotations

from pipeline.audit.registry import (
    AuditQuery,
    BadParameter,
    Param,
    UnknownQuery,
    all_queries,
    get_query,
    parse_assignments,
)
from pipeline.audit.views import TimeWindow, parse_time, register_views

__all__ = [
    "AuditQuery",
    "BadParameter",
    "Param",
    "TimeWindow",
    "UnknownQuery",
    "all_queries",
    "get_query",
    "parse_assignments",
    "parse_time",
    "register_views",
]
