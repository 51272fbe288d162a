"""scripts/pick-python.sh: the interpreter `make` builds the venv with."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "pick-python.sh"


def pick(path: str, distribution: str = "/usr/bin/python3") -> str:
    environment = {**os.environ, "PATH": path, "DISTRIBUTION_PYTHON": distribution}
    done = subprocess.run(
        ["bash", str(SCRIPT)], env=environment, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_the_distributions_python_when_it_can_make_the_venv() -> None:
    chosen = pick(os.environ["PATH"])
    probe = "import ensurepip, sys; print(sys.version_info >= (3, 11))"
    assert subprocess.run([chosen, "-c", probe], capture_output=True, text=True).stdout == "True\n"
    distribution = Path("/usr/bin/python3")
    check = "import ensurepip, sysconfig; print(sysconfig.get_paths()['include'])"
    if distribution.exists():  # Debian's, with venv and headers (scripts/install-system-deps.sh)
        found = subprocess.run([distribution, "-c", check], capture_output=True, text=True)
        if found.returncode == 0 and (Path(found.stdout.strip()) / "Python.h").exists():
            assert chosen == str(distribution)


def test_the_first_python3_on_the_path_otherwise(tmp_path: Path) -> None:
    on_path = tmp_path / "bin" / "python3"
    on_path.parent.mkdir()
    on_path.write_text("#!/bin/sh\nexit 0\n")
    on_path.chmod(0o755)
    unusable = tmp_path / "python-without-venv"
    unusable.write_text("#!/bin/sh\nexit 1\n")  # cannot import ensurepip, say
    unusable.chmod(0o755)
    path = f"{on_path.parent}:/usr/bin:/bin"
    assert pick(path, distribution=str(unusable)) == str(on_path)
    assert pick(path, distribution=str(tmp_path / "none")) == str(on_path)
