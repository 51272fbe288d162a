"""fuzz/totals.py: the sessions of fuzz/sessions.tsv summed per build and target."""

from __future__ import annotations

from fuzz import totals


def _row(target: str, build: str, seconds: int, executions: int, **rest: str) -> dict[str, str]:
    row = {
        "target": target,
        "build": build,
        "seconds": str(seconds),
        "executions": str(executions),
        "cov": "10",
        "ft": "20",
        "peak_rss_mb": "70",
        "kept_files": "3",
        "kept_kb": "2048",
        "failures": "0",
    }
    return row | rest


def test_sessions_are_summed_per_build_and_target_with_the_last_sessions_coverage() -> None:
    rows = [
        _row("tls", "plain", 400, 6_000_000, peak_rss_mb="90"),
        _row("tls", "plain", 600, 5_000_000, cov="12", failures="1"),
        _row("tls", "sanitizer", 100, 1_000),
        _row("decoder", "plain", 60, 12_000),
    ]
    plain = {total.target: total for total in totals.totals(rows, "plain")}
    assert list(plain) == ["decoder", "tls"]  # in the README's order of targets
    tls = plain["tls"]
    assert (tls.sessions, tls.seconds, tls.executions) == (2, 1_000, 11_000_000)
    assert (tls.peak_rss_mb, tls.failures) == (90, 1)
    assert tls.line() == (
        "| `fuzz_tls` | 2 | 1,000 | 11,000,000 | 100% | 12 / 20 | 90 MB | 3 inputs, 2.0 MB | 1 |"
    )
    assert "| 0% |" in plain["decoder"].line()
    table = totals.table(rows, "sanitizer").splitlines()
    assert table[0] == totals.HEADER.splitlines()[0] and len(table) == 3


def test_the_kept_sessions_file_reads() -> None:
    assert totals.main(["plain"]) == 0
