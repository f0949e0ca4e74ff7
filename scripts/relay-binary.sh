# Sourced by the scripts that run pytest against relay processes: takes the relay binary from the first
# argument when it is not an option (else .build/debug/linkrelay), shifts it off, and exports its
# absolute path as LINKRELAY_BINARY; exits 2 when there is none.
binary=.build/debug/linkrelay
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
    binary=$1
    shift
fi
if [ ! -x "$binary" ]; then
    echo "$(basename "$0"): no relay binary at $binary; build it first (swift build)" >&2
    exit 2
fi
LINKRELAY_BINARY="$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")"
export LINKRELAY_BINARY
