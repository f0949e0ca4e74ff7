#!/usr/bin/env bash
# The operators' kit under deploy/: promtool checks the alert rules and runs their unit tests, and
# check-dashboard.py checks the Grafana dashboard (valid JSON, every metric it and the rules read is
# one the relay exports); promtool then parses each of the dashboard's queries too. Installs promtool
# (Debian's prometheus package) and PyYAML when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v promtool >/dev/null; then
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus
fi
python3 -c "import yaml" 2>/dev/null || python3 -m pip install -q --disable-pip-version-check pyyaml

promtool check rules deploy/prometheus/linkrelay-alerts.yml
promtool test rules deploy/prometheus/linkrelay-alerts.test.yml
queries=$(mktemp --suffix=.yml)
trap 'rm -f "$queries"' EXIT
python3 scripts/check-dashboard.py --promql-out "$queries"
promtool check rules "$queries"
