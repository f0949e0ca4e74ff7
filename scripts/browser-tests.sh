#!/usr/bin/env bash
# The real-browser tests: every Tests/browser/test_*.py, run by pytest, drives a headless Chromium
# (Debian's /usr/bin/chromium, through Playwright) or, test_firefox.py, a headless Firefox (Debian's
# /usr/bin/firefox-esr, over WebDriver BiDi) against relay processes it starts and stops itself.
# Builds nothing: it takes the relay binary that is there. Screenshots go to .build/screenshots/.
#
#   scripts/browser-tests.sh [path/to/linkrelay] [pytest arguments, e.g. -k restart]
#
# Needs: pip's playwright, pytest and websockets; chromium (LINKRELAY_CHROMIUM names another
# executable) and firefox-esr (LINKRELAY_FIREFOX; without it the Firefox tests are skipped, except in CI).
set -euo pipefail
cd "$(dirname "$0")/.."

binary=.build/debug/linkrelay
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
    binary=$1
    shift
fi
if [ ! -x "$binary" ]; then
    echo "browser-tests: no relay binary at $binary; build it first (swift build)" >&2
    exit 2
fi
LINKRELAY_BINARY="$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")"
export LINKRELAY_BINARY
mkdir -p .build/screenshots
exec python3 -m pytest -p no:cacheprovider -q Tests/browser "$@"
