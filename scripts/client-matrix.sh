#!/usr/bin/env bash
# The client matrix (Tests/clients, docs/tests.md): the README's walkthrough driven by curl, Python's
# requests, aiohttp and httpx, Node's built-in fetch (node --test), and the page's client.js in headless
# Chromium (Playwright) and Firefox (WebDriver BiDi), against one relay process it starts itself; every
# client is held to the same answers (Tests/clients/expectations.json). Builds and installs nothing.
#
#   scripts/client-matrix.sh [path/to/linkrelay] [pytest arguments, e.g. -k aiohttp]
#
# Needs: curl, node (Debian's nodejs, 20 or later), chromium and firefox-esr (as the browser tests), and
# pip's requests aiohttp httpx pytest standardwebhooks playwright websockets.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/relay-binary.sh
exec python3 -m pytest -p no:cacheprovider -q --rootdir Tests/clients Tests/clients "$@"
