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

source scripts/relay-binary.sh
mkdir -p .build/screenshots
exec python3 -m pytest -p no:cacheprovider -q Tests/browser "$@"
