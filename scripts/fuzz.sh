#!/usr/bin/env bash
# Coverage-guided fuzzing (libFuzzer) of LinkRelay's input parsers, bounded in time for CI.
#
#   scripts/fuzz.sh [seconds-per-target] [target...]
#
# Targets: landing (LandingParameters.parse), final-target-url (FinalTargetURL.validate),
# session-request (CreateSessionRequest.validate); all three by default, 60 seconds each.
# Builds Fuzz/ with -sanitize=fuzzer,address, runs each target on a scratch copy of its committed seed corpus
# (Fuzz/corpus/<target>, never grown by this script) with its dictionary, and exits 1 if any target found a
# crash or a property violation, naming the saved input and how to reproduce it. Logs and crashing inputs go to
# $FUZZ_ARTIFACTS (default Fuzz/.build/artifacts).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

seconds=${1:-60}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then targets=(landing final-target-url session-request); fi
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: scripts/fuzz.sh [seconds-per-target] [landing|final-target-url|session-request ...]" >&2
    exit 2
fi

executable() {
    case "$1" in
    landing) echo FuzzLanding ;;
    final-target-url) echo FuzzFinalTargetURL ;;
    session-request) echo FuzzSessionRequest ;;
    *) echo "unknown fuzz target: $1" >&2; return 2 ;;
    esac
}
for target in "${targets[@]}"; do executable "$target" >/dev/null; done

scratch="$root/Fuzz/.build"
artifacts=${FUZZ_ARTIFACTS:-$scratch/artifacts}
mkdir -p "$artifacts"
artifacts=$(cd "$artifacts" && pwd)

echo "== fuzz: build (release, -sanitize=fuzzer,address)"
build_log="$artifacts/build.log"
if ! swift build --package-path Fuzz --scratch-path "$scratch" -c release -Xswiftc -sanitize=fuzzer,address \
    >"$build_log" 2>&1; then
    grep -v "ld.gold: warning: Cannot export local symbol" "$build_log" | tail -40 >&2
    echo "fuzz: build failed (full log: $build_log)" >&2
    exit 1
fi
bin=$(swift build --package-path Fuzz --scratch-path "$scratch" -c release -Xswiftc -sanitize=fuzzer,address \
    --show-bin-path)

# The Swift runtime's backtracer fights AddressSanitizer over a crashing process; libFuzzer reports instead.
export SWIFT_BACKTRACE=enable=no

work=$(mktemp -d "${TMPDIR:-/tmp}/linkrelay-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT

failed=()
for target in "${targets[@]}"; do
    name=$(executable "$target")
    corpus="$work/$target"
    mkdir -p "$corpus" "$artifacts/$target"
    cp "$root/Fuzz/corpus/$target/"* "$corpus/"
    log="$artifacts/$target/fuzz.log"
    echo "== fuzz: $target ($name), ${seconds}s"
    status=0
    "$bin/$name" "$corpus" \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
        -dict="$root/Fuzz/dictionaries/$target.dict" \
        -artifact_prefix="$artifacts/$target/" -print_final_stats=1 >"$log" 2>&1 || status=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    coverage=$(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)
    if [ "$status" -eq 0 ]; then
        echo "   ok: ${runs:-?} inputs, ${speed:-?} exec/s, ${coverage:-cov: ?}, corpus grew to $(ls "$corpus" | wc -l) inputs"
    else
        failed+=("$target")
        echo "   FAILED (exit $status): full log $log" >&2
        grep -E "property violated|Fatal error|ERROR: (AddressSanitizer|libFuzzer)|SUMMARY" "$log" | head -5 >&2 || true
        grep -E "Test unit written to|Base64:" "$log" | sed 's/^/   /' >&2 || true
        for input in $(sed -n 's/.*Test unit written to //p' "$log"); do
            echo "   reproduce: SWIFT_BACKTRACE=enable=no $bin/$name $input" >&2
        done
    fi
done

if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: crashes or property violations in: ${failed[*]}" >&2
    echo "fuzz: fix them and add each saved input as a regression test (see Fuzz/README.md)" >&2
    exit 1
fi
echo "fuzz: no crashes in ${targets[*]} (${seconds}s each)"
