"""The interactive SQL prompt of `stomp-lake sql`: statements end with `;`, backslash commands
act at once. On a terminal, `pipeline.audit.line_editor` reads whole statements (completion,
multi-line editing, a private history file); piped input is read line by line."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import schemas
from pipeline.audit.output import FORMATS, error_summary, write_result
from pipeline.audit.read_only import RefusedStatement, check_read_only
from pipeline.audit.registry import UnknownQuery, all_queries, get_query
from pipeline.audit.statements import has_code, split_statements

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

HISTORY_ENV = "STOMP_LAKE_SQL_HISTORY"
HISTORY_LENGTH = 2000
PROMPT = "stomp-lake> "
CONTINUATION = "        ...> "

HELP = """\
End a statement with ';' (it may span lines). Every table of the lake is a view by its name.
  \\dt              the tables
  \\d TABLE         a table's columns with their descriptions
  \\audit           the saved audit queries;  \\audit NAME  runs one (default parameters)
  \\format table|csv|json   \\limit N (0: all rows)
  \\?               this help;  \\q (or Ctrl-D)  quit;  Ctrl-C  drops the statement being typed
"""


def history_path() -> Path:
    return Path(os.environ.get(HISTORY_ENV, Path.home() / ".stomp_lake_sql_history"))


class SqlPrompt:
    def __init__(
        self,
        spark: SparkSession,
        tables: list[str],
        out: TextIO,
        *,
        fmt: str = "table",
        limit: int | None = None,
        read: Callable[[str], str] = input,
        read_only: bool = True,
    ) -> None:
        self.spark = spark
        self.tables = tables
        self.out = out
        self.fmt = fmt
        self.limit = limit
        self.read = read
        self.read_only = read_only

    def loop(self) -> int:
        self.out.write(f"tables: {', '.join(self.tables)}\nType \\? for help.\n")
        buffer = ""
        while True:
            try:
                line = self.read(CONTINUATION if buffer else PROMPT)
            except EOFError:
                self.out.write("\n")
                return 0
            except KeyboardInterrupt:
                self.out.write("\n")
                buffer = ""
                continue
            if not has_code(buffer) and line.strip().startswith("\\"):
                buffer = ""
                if self.command(line.strip()) == "quit":
                    return 0
                continue
            buffer += line + "\n"
            statements, buffer = split_statements(buffer)
            for statement in statements:
                self.execute(statement)

    def execute(self, statement: str) -> None:
        try:
            if self.read_only:
                check_read_only(self.spark, statement)
            self.show(self.spark.sql(statement))
        except RefusedStatement as exc:
            self.out.write(f"refused: {exc}\n")
        except KeyboardInterrupt:
            self.spark.sparkContext.cancelAllJobs()
            self.out.write("cancelled\n")
        except Exception as exc:  # noqa: BLE001 - any query error is reported, the prompt goes on
            self.out.write(f"error: {error_summary(exc, statement)}\n")

    def show(self, frame: DataFrame) -> None:
        write_result(frame, self.out, self.fmt, self.limit)

    def command(self, line: str) -> str | None:
        name, _, arg = line.partition(" ")
        arg = arg.strip()
        if name in ("\\q", "\\quit"):
            return "quit"
        if name == "\\?":
            self.out.write(HELP)
        elif name == "\\dt":
            self.list_tables()
        elif name == "\\d" and arg:
            self.describe(arg)
        elif name == "\\d":
            self.list_tables()
        elif name == "\\format" and arg in FORMATS:
            self.fmt = arg
        elif name == "\\limit" and arg.isdigit():
            self.limit = int(arg)
        elif name == "\\audit":
            self.audit(arg)
        else:
            self.out.write(f"unknown or incomplete command {line!r}; \\? lists the commands\n")
        return None

    def list_tables(self) -> None:
        for name in self.tables:
            about = schemas.load(name).description if name in schemas.TABLES else ""
            self.out.write(f"  {name:<14} {about}\n")

    def describe(self, name: str) -> None:
        if name not in self.tables:
            self.out.write(f"no table {name!r}; \\dt lists them\n")
            return
        known = schemas.load(name) if name in schemas.TABLES else None
        about_column = {c.name: c.description for c in known.columns} if known else {}
        for field in self.spark.table(name).schema.fields:
            about = about_column.get(field.name, "")
            self.out.write(f"  {field.name:<22} {field.dataType.simpleString():<28} {about}\n")

    def audit(self, name: str) -> None:
        if not name:
            for query in all_queries():
                self.out.write(f"  {query.name:<20} {query.description}\n")
            return
        try:
            query = get_query(name)
        except UnknownQuery as exc:
            self.out.write(f"{exc}\n")
            return
        try:
            self.show(query.run(self.spark))
        except Exception as exc:  # noqa: BLE001
            self.out.write(f"error: {error_summary(exc)}\n")
