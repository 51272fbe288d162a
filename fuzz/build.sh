#!/usr/bin/env bash
# The sanitizer build for fuzzing (`make fuzz-build`): the package's compiled modules (setup.py's
# extensions) built with clang, AddressSanitizer, UndefinedBehaviorSanitizer and libFuzzer's
# coverage instrumentation (-fsanitize=fuzzer-no-link), as atheris documents for native
# extensions. The build goes to a copy of the sources in build/fuzz/src, so the normal in-place
# build is untouched; fuzz/run.sh runs a target from there with the sanitizer runtime preloaded.
# Incremental: a copy keeps its source's time, and setup.py rebuilds only what is newer
# (FORCE=1 rebuilds everything, after a change of flags).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
OUT=build/fuzz/src
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"

CC="${FUZZ_CC:-}"
if [[ -z "$CC" ]]; then
    for candidate in clang-19 clang-18 clang-17 clang-16 clang; do
        if command -v "$candidate" >/dev/null 2>&1; then
            CC="$candidate"
            break
        fi
    done
fi
if [[ -z "$CC" ]]; then
    echo "fuzz-build: no clang found (scripts/install-system-deps.sh fuzz installs it)" >&2
    exit 1
fi
if ! "$PYTHON" -c "import atheris" 2>/dev/null; then
    echo "fuzz-build: atheris is not installed ($PYTHON -m pip install atheris==3.0.0)" >&2
    exit 1
fi

# The packages the targets import, copied with their times; the targets, the tests' helpers
# and the data they read are linked.
"$PYTHON" - "$OUT" <<'PY'
import shutil, sys
from pathlib import Path

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
skip = shutil.ignore_patterns("__pycache__", "*.so", "corpus", "regressions")
for package in ("pipeline", "capture", "schemas"):
    shutil.copytree(package, out / package, ignore=skip, dirs_exist_ok=True)
shutil.copy2("setup.py", out / "setup.py")
for data in ("fuzz", "samples", "tests"):  # fuzz/ holds no compiled module
    link = out / data
    if not link.is_symlink():
        link.symlink_to(Path(data).resolve())
PY

mkdir -p "$OUT"
"$CC" -shared -fPIC -O2 -o "$OUT/sanitizer_shim.so" fuzz/sanitizer_shim.c

# Not -fsanitize=function: Cython calls every cdef class's methods through its base class's
# vtable type, which that check reports on each call. A function pointer of the wrong type in
# generated code is still refused at compile time (-Wincompatible-function-pointer-types).
SANITIZE="-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize=function"
SANITIZE="$SANITIZE -fno-sanitize-recover=undefined"
cd "$OUT"
echo "fuzz-build: $("$CC" --version | head -1) -> $OUT"
CC="$CC" LDSHARED="$CC -shared" \
    CFLAGS="$SANITIZE -g -fno-omit-frame-pointer -Wno-unused-command-line-argument" \
    LDFLAGS="$SANITIZE" \
    "$PYTHON" setup.py -q build_ext --inplace -j 2 ${FORCE:+--force} 2>&1 | grep -v -E "^(warning|  [0-9]+ \||\s*\^|\s*\|)" || true
built=$(find pipeline -name '*.so' | wc -l)
echo "fuzz-build: $built sanitized extension modules in $OUT"
# Every extension must be there: a missing one would silently fuzz its pure-Python twin.
"$PYTHON" - <<'PY'
import runpy, sys
from pathlib import Path
compiled = runpy.run_path("pipeline/compiled.py")
expected = {*compiled["KERNELS"].values(), *compiled["SOURCE_MODULES"]}
missing = [m for m in sorted(expected) if not list(Path().glob(m.replace(".", "/") + ".*.so"))]
if missing:
    sys.exit(f"fuzz-build: not built: {', '.join(missing)}")
PY
