#!/usr/bin/env bash
# Prints the Python interpreter that `make` builds the project's venv (.venv) with.
#
# The distribution's own Python 3.11+ (/usr/bin/python3) when it can make a venv and build C
# extensions; else the first `python3` on the PATH. `make PYTHON=...` chooses another.
#
# Why the distribution's first: Debian and Ubuntu build CPython with profile-guided and link-time
# optimization, its interpreter linked into the executable. A version manager's build (pyenv's,
# as on the machines this project is benchmarked on) has neither unless asked, and calls its
# libpython through a shared library: pure Python ran 28% slower in it, the flow pass 10%, and
# `stomp-lake run` on 2.26 GB 9% (12.0-12.4 s against 13.2-13.6 s, 4 alternated pairs).
set -euo pipefail

usable() {
    "$1" - <<'EOF' >/dev/null 2>&1
import ensurepip, os, sys, sysconfig
assert sys.version_info >= (3, 11)
assert os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))
EOF
}

system="${DISTRIBUTION_PYTHON:-/usr/bin/python3}"  # another path for the tests
if [[ -x "$system" ]] && usable "$system"; then
    echo "$system"
else
    command -v python3
fi
