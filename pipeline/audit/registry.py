"""The saved audit queries: `queries/<name>.sql`, shipped with the package.

A query file starts with comment lines: the first is its one-line description, then one line per
parameter, `-- param NAME = DEFAULT: what it means`. In the SQL a parameter is a named marker,
`:NAME`, bound by Spark (never pasted into the text). The default's form gives the type: an
integer, a decimal number, or else a string.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING

from pipeline.errors import UsageError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ParamValue = int | float | str

_PARAM = re.compile(
    r"--\s*param\s+(?P<name>[a-z_][a-z0-9_]*)\s*=\s*(?P<default>[^:]+?)\s*:\s*(?P<doc>.*)"
)
_NAME = re.compile(r"[a-z][a-z0-9_]*")


class UnknownQuery(LookupError, UsageError):
    pass


class BadParameter(ValueError, UsageError):
    pass


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    default: ParamValue
    doc: str

    def parse(self, text: str) -> ParamValue:
        """A command-line value, typed like the default."""
        try:
            if isinstance(self.default, int):
                return int(text)
            if isinstance(self.default, float):
                return float(text)
        except ValueError:
            kind = "an integer" if isinstance(self.default, int) else "a number"
            raise BadParameter(f"{self.name} takes {kind}, got {text!r}") from None
        return text


@dataclass(frozen=True, slots=True)
class AuditQuery:
    name: str
    description: str
    params: tuple[Param, ...]
    sql: str

    def bind(self, values: dict[str, ParamValue] | None = None) -> dict[str, ParamValue]:
        """Every parameter's value: the given ones over the defaults."""
        values = dict(values or {})
        known = {p.name for p in self.params}
        unknown = sorted(set(values) - known)
        if unknown:
            raise BadParameter(
                f"{self.name} has no parameter {', '.join(unknown)}"
                + (f" (it takes {', '.join(sorted(known))})" if known else " (it takes none)")
            )
        return {p.name: values.get(p.name, p.default) for p in self.params}

    def run(self, spark: SparkSession, values: dict[str, ParamValue] | None = None) -> DataFrame:
        """The query over the views already registered in `spark` (see `views.register_views`).
        A saved query only reads: one that would do more is refused (RefusedStatement)."""
        from pipeline.audit.read_only import check_read_only

        check_read_only(spark, self.sql)
        args = self.bind(values)
        return spark.sql(self.sql, args=args) if args else spark.sql(self.sql)


def parse_query(name: str, text: str) -> AuditQuery:
    lines = text.splitlines()
    if not lines or not lines[0].startswith("--"):
        raise ValueError(f"audit query {name}: the first line must be a '-- description'")
    description = lines[0].removeprefix("--").strip()
    params = []
    for line in lines[1:]:
        if not line.startswith("--"):
            break
        match = _PARAM.fullmatch(line.strip())
        if match:
            default = _typed(match["default"])
            params.append(Param(match["name"], default, match["doc"].strip()))
    return AuditQuery(name, description, tuple(params), text.strip().rstrip(";"))


def _typed(text: str) -> ParamValue:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text.strip("'\"")


@cache
def all_queries() -> tuple[AuditQuery, ...]:
    folder = resources.files(__package__).joinpath("queries")
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            name = entry.name.removesuffix(".sql")
            if _NAME.fullmatch(name):
                found.append(parse_query(name, entry.read_text("utf-8")))
    return tuple(sorted(found, key=lambda q: q.name))


def get_query(name: str) -> AuditQuery:
    for query in all_queries():
        if query.name == name:
            return query
    known = ", ".join(q.name for q in all_queries())
    raise UnknownQuery(f"no audit query named {name!r}; known: {known}")


def parse_assignments(query: AuditQuery, assignments: list[str]) -> dict[str, ParamValue]:
    """`NAME=VALUE` strings from the command line, typed by the query's parameters."""
    by_name = {p.name: p for p in query.params}
    values: dict[str, ParamValue] = {}
    for item in assignments:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep:
            raise BadParameter(f"expected NAME=VALUE, got {item!r}")
        if name not in by_name:
            query.bind({name: text})  # raises with the list of known parameters
        values[name] = by_name[name].parse(text.strip())
    return values
