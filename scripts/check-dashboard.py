#!/usr/bin/env python3
"""Check the Grafana dashboard and the alert rules under deploy/ against the metrics the relay exports.

1. deploy/grafana/linkrelay.json is valid JSON with a title, a uid, panels with unique ids and a
   grid position, and every query on the `${datasource}` variable;
2. every metric name the dashboard's queries and the alert rules read is one the relay exports: a
   `"linkrelay_…"` name in Sources/ (a histogram's `_bucket`, `_sum` and `_count` included), or,
   with `--metrics-url URL`, one a live relay's /metrics declares;
3. with `--promql-out FILE`, the dashboard's queries are written there as recording rules (`$job` made
   a literal), so that `promtool check rules FILE` parses each of them as Prometheus would.

Prints one line per problem and exits 1, or a one-line summary and exits 0.
"""
import argparse, glob, json, os, re, sys, urllib.request

import yaml  # PyYAML

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DASHBOARD = os.path.join(ROOT, "deploy", "grafana", "linkrelay.json")
RULES = os.path.join(ROOT, "deploy", "prometheus", "linkrelay-alerts.yml")
METRIC = re.compile(r"\blinkrelay_[a-z0-9_]+")
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def exported_in_sources():
    """Every metric name the relay's sources spell out as a string literal."""
    names = set()
    for path in glob.glob(os.path.join(ROOT, "Sources", "**", "*.swift"), recursive=True):
        with open(path, encoding="utf-8") as f:
            names.update(re.findall(r'"(linkrelay_[a-z0-9_]+)"', f.read()))
    return names


def exported_by(url):
    """Every metric name a live relay's /metrics declares (`# TYPE name kind`)."""
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    return set(re.findall(r"^# TYPE (linkrelay_[a-z0-9_]+) ", text, re.M))


def known(name, exported):
    if name in exported:
        return True
    return any(name.endswith(suffix) and name[: -len(suffix)] in exported for suffix in HISTOGRAM_SUFFIXES)


def panels(dashboard):
    """Every panel, those inside collapsed rows included."""
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def check_dashboard(dashboard, problems):
    """The dashboard's queries, as (panel title, expression); its shape's problems go to `problems`."""
    for field in ("title", "uid", "panels"):
        if not dashboard.get(field):
            problems.append(f"dashboard: no {field}")
    names = {variable.get("name") for variable in dashboard.get("templating", {}).get("list", [])}
    for variable in ("datasource", "job"):
        if variable not in names:
            problems.append(f"dashboard: no ${variable} variable")
    ids = set()
    queries = []
    for panel in panels(dashboard):
        title = panel.get("title", "?")
        if panel.get("id") in ids:
            problems.append(f"panel {title!r}: id {panel.get('id')} is used twice")
        ids.add(panel.get("id"))
        if not {"h", "w", "x", "y"} <= set(panel.get("gridPos", {})):
            problems.append(f"panel {title!r}: no gridPos")
        if panel.get("type") == "row":
            continue
        if panel.get("datasource", {}).get("uid") != "${datasource}":
            problems.append(f"panel {title!r}: not on the ${{datasource}} variable")
        if not panel.get("targets"):
            problems.append(f"panel {title!r}: no query")
        for target in panel.get("targets", []):
            if target.get("datasource", {}).get("uid") != "${datasource}":
                problems.append(f"panel {title!r}: query {target.get('refId')} not on the ${{datasource}} variable")
            queries.append((title, target.get("expr", "")))
    return queries


def rule_expressions():
    """Every alert rule's expression."""
    with open(RULES, encoding="utf-8") as f:
        rules = yaml.safe_load(f)
    return [rule["expr"] for group in rules.get("groups", []) for rule in group.get("rules", []) if "expr" in rule]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--metrics-url", help="compare with a live relay's /metrics instead of Sources/")
    parser.add_argument("--promql-out", help="write the dashboard's queries as recording rules for promtool")
    arguments = parser.parse_args()

    problems = []
    try:
        with open(DASHBOARD, encoding="utf-8") as f:
            dashboard = json.load(f)
    except (OSError, ValueError) as error:
        print(f"{os.path.relpath(DASHBOARD, ROOT)}: not valid JSON: {error}")
        return 1
    queries = check_dashboard(dashboard, problems)
    exported = exported_by(arguments.metrics_url) if arguments.metrics_url else exported_in_sources()
    where = arguments.metrics_url or "Sources/"
    read = set()
    for title, expression in queries:
        for name in METRIC.findall(expression):
            read.add(name)
            if not known(name, exported):
                problems.append(f"panel {title!r}: {name} is not exported by the relay ({where})")
    rules = rule_expressions()
    if not rules:
        problems.append(f"{os.path.relpath(RULES, ROOT)}: no expr found")
    for expression in rules:
        for name in METRIC.findall(expression):
            read.add(name)
            if not known(name, exported):
                problems.append(f"alert rules: {name} is not exported by the relay ({where})")

    if arguments.promql_out:
        with open(arguments.promql_out, "w", encoding="utf-8") as out:
            recording = [
                {"record": f"dashboard:query_{index}", "expr": expression.replace("$job", "linkrelay")}
                for index, (_, expression) in enumerate(queries)]
            yaml.safe_dump({"groups": [{"name": "dashboard", "rules": recording}]}, out, sort_keys=False)

    for problem in problems:
        print(problem)
    if problems:
        return 1
    print(f"dashboard and alert rules: {len(queries)} queries and {len(rules)} rules read "
          f"{len(read)} metrics, all exported ({where})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
