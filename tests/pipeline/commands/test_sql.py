"""`stomp-lake sql` in-process on the sample lake: one query in each format, several statements,
errors, and the prompt on a piped stdin."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter

import pytest

from pipeline.cli import main
from pipeline.lake import Lake
from tests.pipeline.audit.sample_lake import connections, shared_sample_lake

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory) -> Lake:
    return shared_sample_lake(tmp_path_factory)


def _sql(lake: Lake, *args: str) -> int:
    return main(["sql", "--lake", str(lake.root), "--master", "local[2]", *args])


LOGINS = "SELECT login, count(*) AS n FROM sessions GROUP BY login ORDER BY login"


def test_a_query_as_csv_json_and_table(lake, capsys, spark) -> None:
    expected = Counter(c["login"] for c in connections())
    assert _sql(lake, "--format", "csv", LOGINS) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert {r["login"]: int(r["n"]) for r in rows} == expected

    assert _sql(lake, "--format", "json", LOGINS + ";") == 0
    assert {o["login"]: o["n"] for o in json.loads(capsys.readouterr().out)} == expected

    assert _sql(lake, LOGINS) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[0].split() == ["login", "|", "n"]
    assert table.endswith(f"({len(expected)} rows)\n")
    # The test session was already running: the command left it so.
    assert spark.range(1).count() == 1


def test_several_statements_print_the_last(lake, capsys) -> None:
    query = (
        "CREATE OR REPLACE TEMP VIEW delivered AS SELECT * FROM messages WHERE command = "
        "'MESSAGE'; SELECT count(*) AS n FROM delivered"
    )
    assert _sql(lake, "--format", "json", query) == 0
    delivered = sum(len(c["messages_received"]) for c in connections())
    assert json.loads(capsys.readouterr().out) == [{"n": delivered}]


def test_a_time_window_limits_every_table(lake, capsys) -> None:
    args = ("--since", "2000-01-01", "--until", "2000-01-02", "--format", "csv")
    assert _sql(lake, *args, "SELECT count(*) AS n FROM frames") == 0
    assert capsys.readouterr().out == "n\n0\n"


def test_bad_queries_and_bad_lakes_exit_non_zero(lake, capsys, tmp_path) -> None:
    assert _sql(lake, "SELECT nope FROM sessions") == 1
    assert "UNRESOLVED_COLUMN" in capsys.readouterr().err
    assert _sql(lake, " -- nothing\n;") == 2
    assert "empty" in capsys.readouterr().err
    assert main(["sql", "--lake", str(tmp_path / "absent"), "SELECT 1"]) == 1
    assert "no lake at" in capsys.readouterr().err
    assert _sql(lake, "--since", "2026-01-02", "--until", "2026-01-01", "SELECT 1") == 2


def test_no_query_opens_the_prompt(lake, capsys, monkeypatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("SELECT 40 + 2 AS answer;\n\\q\n"))
    assert _sql(lake) == 0
    out = capsys.readouterr().out
    assert "tables: sessions, frames" in out
    assert "answer\n------\n    42\n" in out


def test_as_a_user_a_bad_query_is_one_line_and_v_shows_the_rest(tmp_path) -> None:
    """The installed program from a folder of its own: Spark's chatter and its JSON record of
    the error stay out of the terminal; -v brings Spark's whole message back."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    lake, cwd = tmp_path / "lake", tmp_path / "cwd"
    lake.mkdir()
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("STOMP_LAKE_")}
    env.update(TMPDIR=str(tmp_path), STOMP_LAKE_LAKE=str(lake), STOMP_LAKE_MASTER="local[1]")
    program = str(Path(sys.executable).parent / "stomp-lake")

    def sql(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [program, "sql", *args, "SELECT login,\n  nope FROM sessions"],
            cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip

    done = sql()
    assert done.returncode == 1 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert lines[0] == f"stomp-lake: note: {lake} holds no tables yet; they read as empty"
    assert len(lines) == 2, done.stderr
    assert lines[1].startswith("stomp-lake sql: UNRESOLVED_COLUMN.WITH_SUGGESTION: ")
    assert lines[1].endswith("(line 2, column 3: nope)")
    assert list(cwd.iterdir()) == []

    loud = sql("-v")
    assert loud.returncode == 1
    assert "SQLSTATE: 42703" in loud.stderr and "Project" in loud.stderr


def test_as_a_user_the_terminal_prompt_completes_names_and_edits_multi_line(tmp_path) -> None:
    """`stomp-lake sql` on a pseudo-terminal: a statement typed over two lines with a table
    name completed by Tab runs once ';' ends it; `\\d` still describes a table."""
    import fcntl
    import os
    import pty
    import select
    import struct
    import subprocess
    import sys
    import termios
    import time
    from pathlib import Path

    lake = tmp_path / "lake"
    lake.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("STOMP_LAKE_")}
    env.update(
        TMPDIR=str(tmp_path), TERM="xterm", PROMPT_TOOLKIT_NO_CPR="1",
        STOMP_LAKE_SQL_HISTORY=str(tmp_path / "history"),
    )  # fmt: skip
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    program = str(Path(sys.executable).parent / "stomp-lake")
    process = subprocess.Popen(
        [program, "sql", "--lake", str(lake), "--master", "local[1]"],
        stdin=follower, stdout=follower, stderr=follower, env=env, cwd=tmp_path,
    )  # fmt: skip
    os.close(follower)
    seen = bytearray()

    def until(text: bytes, timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        while text not in seen:
            assert time.monotonic() < deadline, bytes(seen)[-2000:]
            ready, _, _ = select.select([leader], [], [], 0.2)
            if ready:
                try:
                    seen.extend(os.read(leader, 65536))
                except OSError:  # EIO: the program closed the terminal
                    break

    try:
        until(b"stomp-lake>")  # the space after it is drawn as a cursor move
        time.sleep(1)  # the prompt is drawn: let it settle into raw mode
        os.write(leader, b"SELECT count(*) AS n\r")
        time.sleep(0.3)
        os.write(leader, b"FROM sessio\t")
        time.sleep(0.5)
        os.write(leader, b";\r")
        until(b"(1 row)")
        os.write(leader, b"\\d errors\r")
        until(b"connection_closed")
        os.write(leader, b"\\q\r")
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
        os.close(leader)
    screen = bytes(seen).decode("utf-8", "replace")
    assert "FROM sessions" in screen  # Tab completed the table name
    assert "...>" in screen  # the statement went on over a second line
    assert process.returncode == 0
    history = (tmp_path / "history").read_text()
    assert "SELECT count(*) AS n" in history and "FROM sessions;" in history
    assert (tmp_path / "history").stat().st_mode & 0o077 == 0


def _files(root) -> dict[str, tuple[int, int]]:
    return {
        str(path.relative_to(root)): (path.stat().st_size, path.stat().st_mtime_ns)
        for path in root.rglob("*")
        if path.is_file()
    }


def test_the_attacks_are_refused_and_change_nothing(lake, capsys, spark, tmp_path) -> None:
    """Writes over committed files, tables written outside the lake, files read by path and JVM
    calls: each is one line, exit 2, and nothing moved."""
    secret = tmp_path / "shadow"
    secret.write_text("root:s3cr3t-hash:19000:0:99999:7:::\n")
    partition = next((lake.root / "tables" / "frames").glob("date=*"))
    outside = tmp_path / "logins"
    before = _files(lake.root)
    attacks = [
        f"INSERT OVERWRITE DIRECTORY '{partition}' USING parquet SELECT * FROM frames",
        f"CREATE TABLE logins USING csv LOCATION '{outside}' AS SELECT login FROM sessions",
        f"SELECT * FROM csv.`{secret}`",
        "SELECT * FROM csv.`/etc/shadow`",
        "SELECT reflect('java.lang.System', 'getenv', 'HOME')",
        "DROP VIEW sessions",
        "ALTER TABLE sessions RENAME TO gone",
        f"ADD JAR {tmp_path / 'evil.jar'}",
        f"SET spark.sql.warehouse.dir={tmp_path}",
        # a refused statement anywhere stops the whole text before anything runs
        f"SELECT 1; CREATE TABLE t2 USING parquet LOCATION '{outside}' AS SELECT 1",
    ]
    for attack in attacks:
        assert _sql(lake, attack) == 2, attack
        captured = capsys.readouterr()
        assert captured.out == "" and "s3cr3t" not in captured.err
        lines = captured.err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("stomp-lake sql: refused: "), attack
    assert _files(lake.root) == before
    assert not outside.exists()
    # runSQLOnFiles was off for the command and is back as the test session had it
    assert spark.conf.get("spark.sql.runSQLOnFiles") == "true"


def test_reads_still_work(lake, capsys) -> None:
    cte = "WITH s AS (SELECT login FROM sessions) SELECT count(DISTINCT login) AS n FROM s"
    assert _sql(lake, "--format", "csv", cte) == 0
    assert capsys.readouterr().out == f"n\n{len({c['login'] for c in connections()})}\n"
    assert _sql(lake, "--format", "csv", "SHOW TABLES") == 0
    assert "sessions" in capsys.readouterr().out
    assert _sql(lake, "--format", "csv", "DESCRIBE sessions") == 0
    assert "login" in capsys.readouterr().out
    assert _sql(lake, "--format", "csv", "SET spark.sql.session.timeZone=UTC; SELECT 1 AS x") == 0
    assert capsys.readouterr().out == "x\n1\n"


def test_allow_write_runs_what_the_owner_asks(lake, capsys, tmp_path) -> None:
    secret = tmp_path / "notes.csv"
    secret.write_text("owner-readable\n")
    folder = tmp_path / "scratch"
    folder.mkdir()
    script = (
        f"CREATE TEMPORARY VIEW scratch (n INT) USING parquet OPTIONS (path '{folder}'); "
        "INSERT INTO scratch SELECT count(*) FROM sessions; SELECT n FROM scratch"
    )
    assert _sql(lake, "--allow-write", "--format", "csv", script) == 0
    assert capsys.readouterr().out == f"n\n{len(list(connections()))}\n"
    assert any(folder.glob("*.parquet"))
    assert _sql(lake, "--allow-write", "--format", "csv", f"SELECT * FROM csv.`{secret}`") == 0
    assert capsys.readouterr().out == "_c0\nowner-readable\n"


def test_the_prompt_refuses_and_goes_on(lake, capsys, monkeypatch) -> None:
    lines = "SELECT * FROM csv.`/etc/shadow`;\nDROP VIEW sessions;\nSELECT 6 * 7 AS answer;\n"
    monkeypatch.setattr("sys.stdin", io.StringIO(lines))
    assert _sql(lake) == 0
    out = capsys.readouterr().out
    assert "refused: csv./etc/shadow is not a view of the lake" in out
    assert "refused: DropView is refused" in out
    assert "answer\n------\n    42\n" in out
