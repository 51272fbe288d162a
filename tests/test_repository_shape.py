"""Tests mirror modules one to one: ``pipeline/x/y.py`` is tested in ``tests/pipeline/x/test_y.py``.

A compiled kernel and its pure-Python twin (``_y.pyx`` beside ``y.py``) share the twin's file,
where the differential test between them lives; ``__main__.py`` is tested in ``test_main.py``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("pipeline", "capture", "dags", "schemas")


def mirrored_test(module: Path) -> Path:
    name = module.stem.strip("_")
    return Path("tests") / module.parent / f"test_{name}.py"


def modules() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", *(f"{package}/*.py" for package in PACKAGES), "pipeline/*.pyx"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [Path(path) for path in listed if Path(path).name != "__init__.py"]


def test_the_names_map_as_the_rule_says() -> None:
    assert mirrored_test(Path("pipeline/ingest/_scan.pyx")) == Path(
        "tests/pipeline/ingest/test_scan.py"
    )
    assert mirrored_test(Path("capture/__main__.py")) == Path("tests/capture/test_main.py")
    assert mirrored_test(Path("pipeline/driver.py")) == Path("tests/pipeline/test_driver.py")


def test_every_module_has_its_mirrored_test_file() -> None:
    found = modules()
    assert len(found) > 100
    missing = [str(mirrored_test(m)) for m in found if not (ROOT / mirrored_test(m)).is_file()]
    assert not missing, f"modules without their mirrored test file: {missing}"
