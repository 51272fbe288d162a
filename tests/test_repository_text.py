"""The repository speaks of the product as it is: no development history in its text (that is
git's), and the README's links lead somewhere."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

HISTORY = re.compile(
    r"\b(?:session|wave) \d+\b|\bthis session\b|\b(?:first|second|third|fourth) wave\b",
    re.IGNORECASE,
)
TEXT_SUFFIXES = {".md", ".py", ".pyx", ".pxd", ".pyi", ".c", ".json", ".toml", ".txt", ".sh"}


def tracked_text_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    paths = [ROOT / name.decode() for name in listed if name]
    return [p for p in paths if p.suffix in TEXT_SUFFIXES and p.is_file()]


def test_no_development_history_in_the_repository() -> None:
    found = []
    for path in tracked_text_files():
        if path == Path(__file__).resolve():
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
            if HISTORY.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}")
    assert not found, "development history belongs in git, not the text:\n" + "\n".join(found)


def test_readme_links_to_files_that_exist() -> None:
    readme = (ROOT / "README.md").read_text()
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", readme):
        assert (ROOT / target).exists(), target
