#!/usr/bin/env bash
# Run one fuzz target under atheris for SECONDS, on the sanitizer build (fuzz/build.sh) when it
# is there, continuing from the kept corpus fuzz/corpus/TARGET; then minimize what the run found
# together with the kept corpus back into it (libFuzzer's -merge=1; on the normal build, only
# add to it), and append the session's figures to fuzz/sessions.tsv. Usage: fuzz/run.sh TARGET SECONDS   (e.g. fuzz/run.sh decoder 600)
# PLAIN=1 runs on the normal build (no sanitizer, no coverage of the compiled code).
# KEEP=0 leaves the kept corpus and fuzz/sessions.tsv alone (a check, as in CI).
# SESSION=NAME runs a second session of a target beside the first (one a core), in a work
# folder of its own; the merges into the kept corpus take turns.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
target="${1:?usage: fuzz/run.sh TARGET SECONDS}"
target="${target#fuzz_}"
seconds="${2:?usage: fuzz/run.sh TARGET SECONDS}"
PYTHON="$ROOT/.venv/bin/python"
[[ -f "fuzz/fuzz_$target.py" ]] || { echo "fuzz/run.sh: no target fuzz/fuzz_$target.py" >&2; exit 2; }

kept="$ROOT/fuzz/corpus/$target"
work="$ROOT/work/fuzz/$target${SESSION:+-$SESSION}"
rm -rf "$work/new" "$work/merged"
mkdir -p "$kept" "$work/new" "$work/merged"
log="$work/session-$(date -u +%Y%m%dT%H%M%SZ).log"

if [[ -z "${PLAIN:-}" && -d build/fuzz/src/pipeline ]]; then
    build=sanitizer
    # the sources as they are now (an edited compiled module is built again)
    flock build/fuzz/build.lock fuzz/build.sh > "$work/build.log" 2>&1 || {
        echo "fuzz/run.sh: the sanitizer build failed (log: $work/build.log)" >&2
        exit 1
    }
    cd build/fuzz/src
    atheris_dir="$("$PYTHON" -c 'import atheris; print(atheris.path())')"
    # ASan and UBSan's runtime with libFuzzer in it, ahead of everything (atheris' documented
    # way); Python's allocator off, so that ASan sees every object's bounds
    export LD_PRELOAD="$atheris_dir/asan_with_fuzzer.so $PWD/sanitizer_shim.so"
    export PYTHONMALLOC=malloc
    export ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1:alloc_dealloc_mismatch=0:malloc_context_size=4:quarantine_size_mb=64:${ASAN_OPTIONS:-}"
    export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}"
else
    build=plain
    if [[ -z "${PLAIN:-}" ]]; then
        echo "fuzz/run.sh: no sanitizer build (make fuzz-build): fuzzing the normal build" >&2
    fi
fi

module="fuzz.fuzz_$target"
began=$SECONDS
set +e
"$PYTHON" -m "$module" --engine atheris --seconds "$seconds" --rss-limit-mb 3072 \
    --corpus "$work/new" --also "$kept" 2>&1 | tee "$log" | grep -E --line-buffered \
    "compiled modules|DONE|ERROR|Sanitizer|runtime error|Traceback|Error|stat::|crash-|slow-unit|timeout" >&2
status=${PIPESTATUS[0]}
set -e
ran=$((SECONDS - began))  # the seconds it ran: a failure or a stop ends it early
new=$(find "$work/new" -type f | wc -l)
crashes=$(grep -c -E "^==[0-9]+==ERROR|runtime error:|Uncaught Python exception" "$log" || true)

if [[ "${KEEP:-1}" != 0 ]]; then
    exec 9> "$ROOT/work/fuzz/$target.lock"
    flock 9  # one merge of a target's corpus at a time
    if [[ $build == plain ]]; then
        # this build's coverage is our Python code's alone: the kept inputs stay, all of them (a
        # minimization here would drop those kept for the compiled code's edges), and the new
        # ones that add to them are added
        cp -a "$kept/." "$work/merged/"
        sources=(--also "$work/new")
    else
        sources=(--also "$kept" --also "$work/new")
    fi
    "$PYTHON" -m "$module" --engine atheris --merge --rss-limit-mb 3072 --corpus "$work/merged" \
        "${sources[@]}" > "$log.merge" 2>&1 || {
        echo "fuzz/run.sh: merge failed (log: $log.merge); kept corpus unchanged" >&2
        exit 1
    }
    rm -rf "$kept.old" && mv "$kept" "$kept.old" && mv "$work/merged" "$kept" && rm -rf "$kept.old"
    stat() { sed -n "s/^stat::$1: *//p" "$log" | tail -1; }
    last=$(grep -E "^#[0-9]+" "$log" | tail -1)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
    # a session stopped early (Ctrl-C) prints no final stats: its last status line tells
    executions=$(stat number_of_executed_units)
    executions=${executions:-$(sed -n 's/^#\([0-9]*\).*/\1/p' <<<"$last")}
    peak=$(stat peak_rss_mb)
    peak=${peak:-$(sed -n 's/.* rss: \([0-9]*\)Mb.*/\1/p' <<<"$last")}
    tsv="$ROOT/fuzz/sessions.tsv"
    [[ -f "$tsv" ]] || printf 'date\ttarget\tbuild\tseconds\texecutions\tcov\tft\tpeak_rss_mb\tnew_units\tkept_files\tkept_kb\tfailures\n' > "$tsv"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$target" "$build" \
        "$ran" "$executions" "${cov:-}" "${ft:-}" "$peak" \
        "$new" "$(find "$kept" -type f | wc -l)" "$(du -sk "$kept" | cut -f1)" "$crashes" >> "$tsv"
    tail -1 "$tsv"
fi
if ((status == 72 || status == 130)); then  # libFuzzer or Python interrupted
    echo "fuzz/run.sh: $target stopped (interrupted); log: $log" >&2
elif ((status != 0)); then
    echo "fuzz/run.sh: $target failed (exit $status); log: $log" >&2
    grep -E "Test unit written to|saved to" "$log" >&2 || true
fi
exit "$status"
