"""What a read-only session runs, judged on Spark's parsed plan (nothing is run here)."""

from __future__ import annotations

import pytest

from pipeline.audit.read_only import RefusedStatement, check_read_only
from pipeline.audit.registry import all_queries

pytestmark = pytest.mark.spark

READS = [
    "SELECT login, count(*) AS n FROM sessions GROUP BY login HAVING n > 1 ORDER BY n LIMIT 5",
    "WITH s AS (SELECT * FROM sessions) SELECT * FROM s WHERE id IN (SELECT id FROM frames)",
    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT * FROM r",
    "SELECT * FROM sessions s JOIN LATERAL (SELECT * FROM frames f WHERE f.id = s.id) x",
    "SELECT a FROM sessions LATERAL VIEW explode(b) t AS c",
    "SELECT sum(a) OVER w FROM sessions WINDOW w AS (PARTITION BY b)",
    "SELECT * FROM sessions PIVOT (count(*) FOR x IN (1, 2))",
    "SELECT /*+ REPARTITION(2) */ * FROM sessions TABLESAMPLE (10 PERCENT)",
    "FROM sessions |> WHERE a > 1 |> AGGREGATE count(*) GROUP BY b |> ORDER BY b",
    "SELECT * FROM range(3) CROSS JOIN LATERAL explode(array(1)), VALUES (1) AS v(x)",
    "SELECT transform(array(1, 2), x -> x + 1), xpath_string(body, '/a') FROM messages",
    "SELECT :since, ? FROM sessions",
    "TABLE sessions",
    "SHOW TABLES",
    "SHOW COLUMNS IN sessions",
    "SHOW FUNCTIONS",
    "DESCRIBE sessions",
    "DESCRIBE EXTENDED sessions login",
    "DESCRIBE FUNCTION reflect",
    "DESCRIBE QUERY SELECT * FROM sessions",
    "EXPLAIN EXTENDED SELECT * FROM sessions",
    "CREATE OR REPLACE TEMPORARY VIEW mine AS SELECT * FROM sessions",
    "SET spark.sql.session.timeZone = UTC",
    "SET TIME ZONE 'Europe/Paris'",
]

REFUSALS = {
    "INSERT OVERWRITE DIRECTORY '/lake/tables/frames/date=2026-11-22' USING parquet SELECT 1": (
        "INSERT OVERWRITE DIRECTORY"
    ),
    "CREATE TABLE stolen USING csv LOCATION '/tmp/out' AS SELECT login FROM sessions": (
        "CreateTableAsSelect"
    ),
    "CREATE TABLE t (a INT) USING parquet LOCATION '/tmp/t'": "CreateTable",
    "SELECT * FROM csv.`/etc/shadow`": "csv./etc/shadow is not a view of the lake",
    "SELECT * FROM sessions WHERE login IN (SELECT _c0 FROM text.`/etc/shadow`)": "text.",
    "WITH x AS (SELECT * FROM parquet.`/work`) SELECT 1": "parquet./work",
    "SELECT * FROM `delta`.`/lake/tables/frames`": "delta.",
    "SELECT * FROM binaryFile.`/etc`": "binaryFile.",
    "SELECT * FROM IDENTIFIER('json.`/etc/passwd`')": "json./etc/passwd",
    "SELECT * FROM default.sessions": "default.sessions",
    "SELECT reflect('java.lang.System', 'getenv', 'HOME')": "reflect()",
    "SELECT system.builtin.java_method('java.lang.System', 'exit', 0)": "java_method()",
    "SELECT filter(array(1), x -> try_reflect('a', 'b') IS NULL)": "try_reflect()",
    "SELECT (SELECT reflect('a', 'b'))": "reflect()",
    "SELECT IDENTIFIER('reflect')('java.lang.System', 'getenv', 'HOME')": "IDENTIFIER",
    "SELECT * FROM read_files('/etc/shadow')": "read_files()",
    "SELECT TRANSFORM(login) USING 'cat /etc/shadow' FROM sessions": "TRANSFORM",
    "INSERT INTO sessions SELECT * FROM sessions": "INSERT",
    "WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x": "INSERT",
    "EXPLAIN INSERT INTO t SELECT 1": "INSERT",
    "DROP TABLE sessions": "DropTable",
    "DROP VIEW sessions": "DropView",
    "ALTER TABLE sessions RENAME TO gone": "RenameTable",
    "ADD JAR /tmp/evil.jar": "ADD JAR",
    "ADD FILE /etc/shadow": "ADD FILE",
    "CREATE FUNCTION f AS 'x.Y' USING JAR '/tmp/evil.jar'": "CreateFunction",
    "CREATE TEMPORARY VIEW peek USING csv OPTIONS (path '/etc/shadow')": "USING",
    "CREATE GLOBAL TEMPORARY VIEW g AS SELECT 1": "CreateViewCommand",
    "SET spark.sql.warehouse.dir = /tmp": "SET is refused",
    "SET spark.sql.runSQLOnFiles = true": "SET is refused",
    "SET": "SET is refused",
    "RESET": "RESET",
    "CACHE TABLE sessions": "CacheTable",
    "UNCACHE TABLE sessions": "UncacheTable",
    "MSCK REPAIR TABLE frames": "RepairTable",
    "LOAD DATA LOCAL INPATH '/etc/shadow' INTO TABLE t": "LoadData",
    "TRUNCATE TABLE frames": "TruncateTable",
    "BEGIN SELECT 1; END": "SQL script",
    "EXECUTE IMMEDIATE 'DROP TABLE t'": "EXECUTE IMMEDIATE",
}


@pytest.mark.parametrize("statement", READS)
def test_reads_pass(spark, statement: str) -> None:
    check_read_only(spark, statement)


@pytest.mark.parametrize(("statement", "said"), REFUSALS.items())
def test_everything_else_is_refused_with_one_line(spark, statement: str, said: str) -> None:
    with pytest.raises(RefusedStatement) as refused:
        check_read_only(spark, statement)
    message = str(refused.value)
    assert said in message and "\n" not in message
    assert message.endswith("--allow-write lifts this")


def test_every_saved_audit_query_only_reads(spark) -> None:
    for query in all_queries():
        check_read_only(spark, query.sql)


def test_a_statement_that_does_not_parse_is_spark_s_parse_error(spark) -> None:
    from pyspark.errors import ParseException

    with pytest.raises(ParseException):
        check_read_only(spark, "SELEKT 1")
