#!/usr/bin/env python3
"""Draws Benchmarks/scaling.sh's results: KiB per waiter and tap->`tapped` p50 / p99 against the waiters
held, one column per transport, the relay beside nginx+nchan. Each point is the median of the rounds.
Also prints the same figures as a Markdown table per anchor, with the median and range of the relay's ratio
to it taken round by round (each round's relay and anchors ran one after the other).

  Benchmarks/scaling-chart.py scaling.jsonl scaling.png

Needs: pip install matplotlib.
"""
import collections, json, statistics, sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

TRANSPORTS = {"longpoll": "long-poll", "ws": "WebSocket", "sse": "SSE"}
TARGETS = {"relay": ("LinkRelay", "tab:blue"), "nchan": ("nginx+nchan", "tab:gray"),
           "nchan-contract": ("nginx+nchan, the relay's keep-alives", "tab:orange")}
ROWS = [("KiB per waiter", lambda r: r.get("kib_per_waiter")),
        ("tapped p50 (ms)", lambda r: (r.get("tapped_ms") or {}).get("p50")),
        ("tapped p99 (ms)", lambda r: (r.get("tapped_ms") or {}).get("p99"))]


def main(source, png):
    runs = collections.defaultdict(list)
    failed = collections.Counter()
    for line in open(source):
        r = json.loads(line)
        if "target" in r:
            runs[r["target"], r["transport"], r["n"]].append(r)
            failed[r["target"], r["transport"], r["n"]] += r.get("failed", 0)

    def median(target, transport, n, figure):
        values = [v for v in map(figure, runs.get((target, transport, n), [])) if v is not None]
        return statistics.median(values) if values else None

    sizes = sorted({n for (_, _, n) in runs})
    rounds = max((len(v) for v in runs.values()), default=0)
    fig, axes = plt.subplots(len(ROWS), len(TRANSPORTS), figsize=(12, 9), sharex=True)
    for column, (transport, title) in enumerate(TRANSPORTS.items()):
        for row, (label, figure) in enumerate(ROWS):
            ax = axes[row][column]
            for target, (name, colour) in TARGETS.items():
                points = [(n, median(target, transport, n, figure)) for n in sizes]
                points = [(n, v) for n, v in points if v is not None]
                if points:
                    ax.plot(*zip(*points), marker="o", label=name, color=colour)
            ax.set_ylim(bottom=0)
            ax.set_xticks(sizes, [f"{n / 1000:g}k" for n in sizes])
            ax.grid(alpha=0.3)
            if row == 0:
                ax.set_title(title)
            if column == 0:
                ax.set_ylabel(label)
            if row == len(ROWS) - 1:
                ax.set_xlabel("waiters held")
    axes[0][0].legend()
    fig.suptitle(f"Cost against waiters held (median of {rounds} round{'s' * (rounds != 1)}, one sitting)")
    fig.tight_layout()
    fig.savefig(png, dpi=100)

    for anchor in [a for a in TARGETS if a != "relay" and any(k[0] == a for k in runs)]:
        print(f"\nThe relay against {anchor}:\n")
        print(f"| transport | waiters | KiB/waiter relay / {anchor} | tapped p50 ms relay / {anchor}, ratio (range) "
              f"| tapped p99 ms relay / {anchor}, ratio (range) | failed relay / {anchor} |")
        print("|---|---|---|---|---|---|")
        for transport, title in TRANSPORTS.items():
            for n in sizes:
                cells = []
                for label, figure in ROWS:
                    relay, other = median("relay", transport, n, figure), median(anchor, transport, n, figure)
                    cell = f"{fmt(relay)} / {fmt(other)}"
                    ratios = round_ratios(runs, anchor, transport, n, figure) if "ms" in label else []
                    if ratios:
                        cell += f", {statistics.median(ratios):.2f}× ({min(ratios):.2f}–{max(ratios):.2f})"
                    cells.append(cell)
                cells.append(f"{failed['relay', transport, n]} / {failed[anchor, transport, n]}")
                print(f"| {title} | {n:,} | " + " | ".join(cells) + " |")


def round_ratios(runs, anchor, transport, n, figure):
    """The relay's figure over the anchor's, for each round that has both."""
    by_round = {}
    for target in ("relay", anchor):
        for r in runs.get((target, transport, n), []):
            by_round.setdefault(r.get("round"), {})[target] = figure(r)
    return [pair["relay"] / pair[anchor] for pair in by_round.values()
            if pair.get("relay") is not None and pair.get(anchor)]


def fmt(value):
    return "-" if value is None else f"{value:.2f}"


if __name__ == "__main__":
    main(*sys.argv[1:3])
