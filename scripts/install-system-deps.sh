#!/usr/bin/env bash
# Install the Debian packages the stomp-lake tests need (brokers, capture tools, Java).
# Idempotent: installs only what is missing. Needs root when something is missing.
# Usage: scripts/install-system-deps.sh [all|java|fuzz]   (Debian 12 "bookworm" or later)
#   all (default): everything the tests need; java: only Java, all `make demo` needs;
#   fuzz: only clang, for the sanitizer build of `make fuzz-build`.
set -euo pipefail

# ---- package lists: add packages here ------------------------------------------------
BROKER_PACKAGES=(activemq rabbitmq-server)
CAPTURE_PACKAGES=(tshark tcpdump tcpflow socat)
# Callgrind, for the flow pass's instruction counts (benchmarks/bench_flow_instructions.py).
BENCH_PACKAGES=(valgrind)
# Headless browser and its WebDriver, used by the HTML report test.
BROWSER_PACKAGES=(chromium chromium-driver)
# Node and npm for the STOMP-over-WebSocket clients (@stomp/stompjs; `make js-deps`), when
# no node / npm command is found (they may come from elsewhere than Debian).
NODE_PACKAGE=nodejs
NPM_PACKAGE=npm
JAVA_PACKAGE=openjdk-17-jre-headless
# The distribution's Python with venv and headers, and OpenSSL's headers for the TLS kernel
# (pipeline/tls/_bulk.pyx): `make` builds the venv with it, the faster
# interpreter (scripts/pick-python.sh); without them it takes the first python3 on the PATH.
PYTHON_PACKAGES=(python3-venv python3-dev libssl-dev)
# clang for the sanitizer build of the compiled modules (`make fuzz-build`, fuzz/build.sh),
# with its compiler runtime (the static parts of ASan and UBSan that every sanitized module
# links); only with the `fuzz` argument. The runtime loaded with libFuzzer comes with atheris.
FUZZ_PACKAGES=(clang-19 libclang-rt-19-dev)
# ---------------------------------------------------------------------------------------

# Answer to wireshark-common's "should non-superusers be able to capture packets?".
WIRESHARK_NONROOT_CAPTURE="${WIRESHARK_NONROOT_CAPTURE:-false}"

export DEBIAN_FRONTEND=noninteractive

is_installed() {
    [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" == "install ok installed" ]]
}

scope="${1:-all}"
case "$scope" in
all | java | fuzz) ;;
*)
    echo "usage: $0 [all|java|fuzz]" >&2
    exit 2
    ;;
esac

missing=()
if [[ "$scope" == fuzz ]]; then
    for package in "${FUZZ_PACKAGES[@]}"; do
        is_installed "$package" || missing+=("$package")
    done
elif ! command -v java >/dev/null 2>&1; then
    missing+=("$JAVA_PACKAGE")
fi
if [[ "$scope" == all ]]; then
    for package in "${BROKER_PACKAGES[@]}" "${CAPTURE_PACKAGES[@]}" "${BENCH_PACKAGES[@]}" \
        "${PYTHON_PACKAGES[@]}" ${BROWSER_PACKAGES[@]+"${BROWSER_PACKAGES[@]}"}; do
        is_installed "$package" || missing+=("$package")
    done
    command -v node >/dev/null 2>&1 || missing+=("$NODE_PACKAGE")
    command -v npm >/dev/null 2>&1 || missing+=("$NPM_PACKAGE")
fi

if ((${#missing[@]} == 0)); then
    echo "system deps: all present"
    exit 0
fi

if [[ "$(id -u)" -ne 0 ]]; then
    echo "system deps: missing Debian packages: ${missing[*]}" >&2
    echo "install them as root, e.g.:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
    echo "or run this script as root: sudo $0" >&2
    exit 1
fi

log="$(mktemp -t stomp-lake-apt.XXXXXX.log)"
policy=/usr/sbin/policy-rc.d
own_policy=false

cleanup() {
    if [[ "$own_policy" == true ]]; then
        rm -f "$policy"
    fi
}
fail() {
    echo "system deps: $1 failed; apt output follows (also in $log):" >&2
    tail -n 60 "$log" >&2
    exit 1
}
trap cleanup EXIT

# The tests start their own broker instances; keep the packages' system services from
# starting during install (the standard policy-rc.d mechanism; only if none is in place).
if [[ ! -e "$policy" ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    own_policy=true
fi

echo "wireshark-common wireshark-common/install-setuid boolean $WIRESHARK_NONROOT_CAPTURE" |
    debconf-set-selections

echo "system deps: installing ${missing[*]}"
apt-get update -qq >"$log" 2>&1 || fail "apt-get update"
apt-get install -y -qq --no-install-recommends "${missing[@]}" >>"$log" 2>&1 ||
    fail "apt-get install"

still_missing=()
for package in "${missing[@]}"; do
    is_installed "$package" || still_missing+=("$package")
done
if ((${#still_missing[@]} > 0)); then
    fail "installing ${still_missing[*]}"
fi
rm -f "$log"
echo "system deps: installed ${missing[*]}"
