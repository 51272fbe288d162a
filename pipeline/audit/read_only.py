"""Which SQL statements a read-only session runs, judged on Spark's parsed plan.

A statement is parsed by the session's own parser (no analysis, nothing runs) and its plan
walked: plan nodes, the query plans inside expressions (subqueries, pipe operators) and the
inner plans of CTEs. Allowed are queries made only of the node kinds below, over one-part names
(the lake's views, CTEs, temporary views), calling neither JVM methods nor `IDENTIFIER(...)`;
the read-only SHOW/DESCRIBE/EXPLAIN commands; temporary views over such a query; and `SET` of a
few harmless settings. Everything else (writes, DDL, ADD JAR, CACHE, files read by path,
TRANSFORM scripts, SQL scripts) is refused with a `RefusedStatement`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pipeline.errors import UsageError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ALLOW_WRITE_HINT = "read-only; --allow-write lifts this"

# Plan nodes a query is made of, as the parser builds them.
QUERY_NODES = frozenset(
    {
        "Aggregate",
        "Distinct",
        "Except",
        "Filter",
        "Generate",
        "GlobalLimit",
        "Intersect",
        "Join",
        "LateralJoin",
        "LimitAll",
        "LocalLimit",
        "LocalRelation",
        "Offset",
        "OneRowRelation",
        "PipeOperator",
        "Pivot",
        "Project",
        "Repartition",
        "RepartitionByExpression",
        "RebalancePartitions",
        "Sample",
        "Sort",
        "SubqueryAlias",
        "Tail",
        "Union",
        "Unpivot",
        "UnresolvedHaving",
        "UnresolvedHint",
        "UnresolvedInlineTable",
        "UnresolvedQualify",
        "UnresolvedRelation",
        "UnresolvedSubqueryColumnAliases",
        "UnresolvedTableValuedFunction",
        "UnresolvedTVFAliases",
        "UnresolvedWith",
        "Window",
        "WithWindowDefinition",
    }
)
# Commands that only read the catalog or a plan: their table names are checked like a query's.
READ_COMMANDS = frozenset(
    {
        "DescribeColumn",
        "DescribeFunction",
        "DescribeRelation",
        "ShowColumns",
        "ShowFunctions",
        "ShowTables",
        "ShowViews",
    }
)
# Built-in table-valued functions that compute rows; any other (a file reader, a Python UDTF)
# is refused.
SAFE_TABLE_FUNCTIONS = frozenset(
    {
        "collations",
        "explode",
        "explode_outer",
        "inline",
        "inline_outer",
        "json_tuple",
        "posexplode",
        "posexplode_outer",
        "range",
        "sql_keywords",
        "stack",
        "variant_explode",
        "variant_explode_outer",
    }
)
# Functions that call JVM methods by name.
JVM_FUNCTIONS = frozenset({"java_method", "reflect", "try_reflect"})
# Runtime settings a reader may change for the session; every other SET (and RESET) is refused.
SAFE_SETTINGS = frozenset(
    {
        "spark.sql.ansi.enabled",
        "spark.sql.session.timeZone",
        "spark.sql.shuffle.partitions",
    }
)
_IDENTIFIER_NODES = frozenset(
    {"ExpressionWithUnresolvedIdentifier", "PlanWithUnresolvedIdentifier"}
)
_TABLE_NAMES = frozenset({"UnresolvedRelation", "UnresolvedTableOrView", "UnresolvedTable"})
_PLAN_EXPRESSION = "org.apache.spark.sql.catalyst.expressions.PlanExpression"
_LOGICAL_PLAN = "org.apache.spark.sql.catalyst.plans.logical.LogicalPlan"


class RefusedStatement(UsageError):
    """A statement a read-only session does not run."""


def check_read_only(spark: SparkSession, statement: str) -> None:
    """Returns when `statement` only reads; raises RefusedStatement otherwise. A statement that
    does not parse raises Spark's ParseException."""
    parser = spark._jsparkSession.sessionState().sqlParser()  # noqa: SLF001 - the JVM parser
    _Checker(spark).statement(parser.parsePlan(statement))


def _seq(scala_seq: Any) -> list[Any]:
    return [scala_seq.apply(i) for i in range(scala_seq.size())]


def _kind(node: Any) -> str:
    return str(node.getClass().getSimpleName()).removesuffix("$")


class _Checker:
    def __init__(self, spark: SparkSession) -> None:
        jvm = spark._jvm  # noqa: SLF001
        assert jvm is not None
        self._plan_expression = jvm.java.lang.Class.forName(_PLAN_EXPRESSION)
        self._logical_plan = jvm.java.lang.Class.forName(_LOGICAL_PLAN)

    def statement(self, plan: Any) -> None:
        kind = _kind(plan)
        if kind in READ_COMMANDS:
            for node in _seq(plan.children()):
                self._names(node)
        elif kind == "ExplainCommand":
            self.statement(plan.logicalPlan())
        elif kind == "DescribeQueryCommand" or _is_temp_view(kind, plan):
            self.query(plan.plan())
        elif kind == "SetCommand":
            self._setting(plan)
        else:
            self.query(plan)

    def query(self, plan: Any) -> None:
        for node in self._plans(plan):
            kind = _kind(node)
            if kind not in QUERY_NODES:
                raise RefusedStatement(f"{_describe(kind)} is refused: {ALLOW_WRITE_HINT}")
            if kind == "UnresolvedTableValuedFunction":
                name = _last(node.name())
                if name not in SAFE_TABLE_FUNCTIONS:
                    raise RefusedStatement(
                        f"the table function {name}() is refused: {ALLOW_WRITE_HINT}"
                    )
            self._names(node)
            for expression in _seq(node.expressions()):
                self._expression(expression)

    def _plans(self, plan: Any) -> Iterator[Any]:
        """Every plan node, with the CTE definitions (inner children) and the plans inside
        expressions (checked by `_expression`)."""
        yield plan
        for child in _seq(plan.children()) + _seq(plan.innerChildren()):
            if self._logical_plan.isInstance(child):
                yield from self._plans(child)

    def _expression(self, expression: Any) -> None:
        kind = _kind(expression)
        if kind in _IDENTIFIER_NODES:
            raise RefusedStatement(f"IDENTIFIER(...) is refused: {ALLOW_WRITE_HINT}")
        if kind == "UnresolvedFunction":
            name = _last(expression.nameParts())
            if name in JVM_FUNCTIONS:
                raise RefusedStatement(f"{name}() calls the JVM and is refused: {ALLOW_WRITE_HINT}")
        if self._plan_expression.isInstance(expression):
            self.query(expression.plan())
        for child in _seq(expression.children()):
            self._expression(child)

    def _names(self, node: Any) -> None:
        kind = _kind(node)
        if kind in _IDENTIFIER_NODES:
            raise RefusedStatement(f"IDENTIFIER(...) is refused: {ALLOW_WRITE_HINT}")
        if kind in _TABLE_NAMES:
            parts = [str(part) for part in _seq(node.multipartIdentifier())]
            if len(parts) != 1:
                raise RefusedStatement(
                    f"{'.'.join(parts)} is not a view of the lake (only one-part names are read: "
                    f"no files by path, no catalogs): {ALLOW_WRITE_HINT}"
                )

    def _setting(self, plan: Any) -> None:
        pair = plan.kv()
        key = str(pair.get()._1()) if pair.isDefined() else ""
        value_given = pair.isDefined() and pair.get()._2().isDefined()
        if key not in SAFE_SETTINGS or not value_given:
            allowed = ", ".join(sorted(SAFE_SETTINGS))
            raise RefusedStatement(f"SET is refused except SET of {allowed}: {ALLOW_WRITE_HINT}")


def _is_temp_view(kind: str, plan: Any) -> bool:
    """CREATE [OR REPLACE] TEMPORARY VIEW name AS query: the session's own, nothing written."""
    return kind == "CreateViewCommand" and _kind(plan.viewType()) == "LocalTempView"


def _last(name_parts: Any) -> str:
    if isinstance(name_parts, str):
        return name_parts.lower()
    return str(_seq(name_parts)[-1]).lower()


def _describe(kind: str) -> str:
    """A plan node's class name as the statement an operator typed, where it is plain."""
    known = {
        "InsertIntoStatement": "INSERT",
        "InsertIntoDir": "INSERT OVERWRITE DIRECTORY",
        "ScriptTransformation": "TRANSFORM ... USING (a script)",
        "AddJarsCommand": "ADD JAR",
        "AddFilesCommand": "ADD FILE",
        "AddArchivesCommand": "ADD ARCHIVE",
        "CreateTempViewUsing": "CREATE TEMPORARY VIEW ... USING",
        "CompoundBody": "a SQL script (BEGIN ... END)",
        "UnresolvedExecuteImmediate": "EXECUTE IMMEDIATE",
        "ResetCommand": "RESET",
    }
    return known.get(kind, kind)
