#!/usr/bin/env bash
# Prints the URL of a repeat landing on a running relay with the embedded sandbox: creates a session,
# opens its Instant Link as the phone would, lands, and waits for the result, so that the URL is the
# reload of an ended session's landing (the request a phone repeats most). Used by run.sh and landings.sh.
#
#   Benchmarks/repeat-landing.sh PORT API_KEY
set -euo pipefail
port=$1
key=$2
session=$(curl -sf -X POST "http://127.0.0.1:$port/v1/sessions" -H "Authorization: Bearer $key" \
    -H 'Content-Type: application/json' -d '{"phoneNumber":"2001004014"}')
link=$(curl -sf "http://127.0.0.1:$port/sandbox/outbox?phoneNumber=2001004014" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["messages"][-1]["link"])')
landing=$(curl -s -o /dev/null -w '%{redirect_url}' "$link")
curl -sf -o /dev/null "$landing"
id=$(echo "$session" | python3 -c 'import json,sys; print(json.load(sys.stdin)["sessionId"])')
until curl -sf "http://127.0.0.1:$port/v1/sessions/$id" -H "Authorization: Bearer $key" | grep -q '"result"'; do
    sleep 0.05
done
echo "$landing"
