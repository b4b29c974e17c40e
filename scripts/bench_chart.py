"""Render `make bench`'s figures against Powertools for AWS Lambda (Python)
as an SVG chart: from the `peer` section (target/bench-peer.json) messages
per second by batch size and cold start, and from the `latency` section
(target/bench-latency.json, when given) messages per second with a fixed
latency on every DynamoDB request, next to the limit (the batches' critical
path). Run by `make bench` in target/bench-venv (matplotlib is pinned in
bench/powertools/requirements.txt). Nothing here is a figure of its own:
every bar and mark is a number from the JSON.

    python scripts/bench_chart.py target/bench-peer.json [target/bench-latency.json] docs/bench-peer.svg
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# Reproducible SVG: no random ids, no date.
matplotlib.rcParams["svg.hashsalt"] = "bench-peer"
matplotlib.rcParams["svg.fonttype"] = "none"

PROJECT, POWERTOOLS = "order-consumer (Rust)", "Powertools (Python)"
COLORS = {"p": "#d9622b", "p8": "#f0a272", "q": "#3b75af"}
# The MAX_CONCURRENCY drawn beside the best one: the default.
DEFAULT_CONCURRENCY = 8


def peer_panels(ax1, ax2, fig_data) -> None:
    batches = fig_data["batches"]
    labels = [f"{b['batch']:,}" for b in batches]
    p = [b["order_consumer_msgs_per_s"] for b in batches]
    q = [b["powertools_msgs_per_s"] for b in batches]
    cold = fig_data["cold_start_ms"]

    x = range(len(batches))
    w = 0.38
    b1 = ax1.bar([i - w / 2 for i in x], p, w, label=PROJECT, color=COLORS["p"])
    b2 = ax1.bar([i + w / 2 for i in x], q, w, label=POWERTOOLS, color=COLORS["q"])
    ax1.bar_label(b1, labels=[f"{v:,.0f}" for v in p], fontsize=8, padding=2)
    ax1.bar_label(b2, labels=[f"{v:,.0f}" for v in q], fontsize=8, padding=2)
    ax1.set_yscale("log")
    ax1.set_xticks(list(x), labels)
    ax1.set_xlabel("batch size (records per invocation)")
    ax1.set_ylabel("messages / s (log scale)")
    ax1.set_title("Throughput, first-time messages, warm process, no latency")
    ax1.legend(loc="upper left", fontsize=8)
    ax1.margins(y=0.15)

    c = [cold["order_consumer"], cold["powertools"]]
    b3 = ax2.bar([0, 1], c, 0.6, color=[COLORS["p"], COLORS["q"]])
    ax2.bar_label(b3, labels=[f"{v:,.0f} ms" for v in c], fontsize=8, padding=2)
    ax2.set_xticks([0, 1], ["order-consumer", "Powertools"])
    ax2.set_ylabel("ms")
    ax2.set_title("Cold start: spawn → first response")
    ax2.margins(y=0.15)


def latency_panel(ax, latency_ms: int, rows: list) -> None:
    """One latency: per batch size, order-consumer at the default and at its
    best MAX_CONCURRENCY, Powertools, and the limit as a black mark."""
    rows = [r for r in rows if r["latency_ms"] == latency_ms]
    labels = [f"{r['batch']:,}" for r in rows]
    default = [
        next(
            (o["msgs_per_s"] for o in r["order_consumer"] if o["max_concurrency"] == DEFAULT_CONCURRENCY),
            0.0,
        )
        for r in rows
    ]
    best = [max(o["msgs_per_s"] for o in r["order_consumer"]) for r in rows]
    q = [r["powertools_msgs_per_s"] for r in rows]
    limit = [r["limit_msgs_per_s"] for r in rows]
    x = range(len(rows))
    w = 0.26
    bars = [
        ax.bar([i - w for i in x], default, w, color=COLORS["p8"], label=f"{PROJECT}, MAX_CONCURRENCY={DEFAULT_CONCURRENCY}"),
        ax.bar(list(x), best, w, color=COLORS["p"], label=f"{PROJECT}, best MAX_CONCURRENCY"),
        ax.bar([i + w for i in x], q, w, color=COLORS["q"], label=POWERTOOLS),
    ]
    for b, values in zip(bars, (default, best, q)):
        ax.bar_label(b, labels=[f"{v:,.0f}" for v in values], fontsize=6, padding=1)
    ax.hlines(limit, [i - 1.6 * w for i in x], [i + 1.6 * w for i in x], colors="black", linewidth=1.2, label="limit: critical path × latency")
    ax.set_yscale("log")
    ax.set_xticks(list(x), labels)
    ax.set_xlabel("batch size")
    ax.set_title(f"{latency_ms} ms on every DynamoDB request", fontsize=9)
    ax.margins(y=0.2)


def main(src: str, latency_src: str | None, dst: str) -> None:
    with open(src) as f:
        fig_data = json.load(f)
    latency = None
    if latency_src:
        with open(latency_src) as f:
            latency = json.load(f)["rows"]

    if latency:
        latencies = sorted({r["latency_ms"] for r in latency})
        fig = plt.figure(figsize=(11, 8.4))
        grid = fig.add_gridspec(2, len(latencies) * 2, height_ratios=[1, 1])
        ax1 = fig.add_subplot(grid[0, : len(latencies)])
        ax2 = fig.add_subplot(grid[0, len(latencies) + 1 :])
        peer_panels(ax1, ax2, fig_data)
        axes = [fig.add_subplot(grid[1, 2 * i : 2 * i + 2]) for i in range(len(latencies))]
        for i, (ax, ms) in enumerate(zip(axes, latencies)):
            latency_panel(ax, ms, latency)
            if i == 0:
                ax.set_ylabel("messages / s (log scale)")
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=7, bbox_to_anchor=(0.5, 0.025))
        rect = (0, 0.07, 1, 0.95)
    else:
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4.2), gridspec_kw={"width_ratios": [3, 1.4]})
        peer_panels(ax1, ax2, fig_data)
        rect = (0, 0.03, 1, 0.95)

    fig.suptitle(
        "make bench, sections peer and latency: same Runtime API emulator, same local DynamoDB (dynoxide)",
        fontsize=9,
    )
    fig.text(0.5, 0.005, fig_data["machine"], ha="center", fontsize=7, color="#555")
    fig.tight_layout(rect=rect)
    fig.savefig(dst, format="svg", metadata={"Date": None})


if __name__ == "__main__":
    if len(sys.argv) == 3:
        main(sys.argv[1], None, sys.argv[2])
    elif len(sys.argv) == 4:
        main(sys.argv[1], sys.argv[2], sys.argv[3])
    else:
        sys.exit("usage: bench_chart.py PEER.json [LATENCY.json] OUT.svg")
