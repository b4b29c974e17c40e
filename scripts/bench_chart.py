"""Render the `peer` section's figures (target/bench-peer.json, written by
`cargo bench --bench bench -- peer`) as an SVG chart: messages per second
by batch size, order-consumer vs Powertools for AWS Lambda (Python), and
cold start. Run by `make bench` in target/bench-venv (matplotlib is pinned
in bench/powertools/requirements.txt). Nothing here is a figure of its own:
every bar is a number from the JSON.

    python scripts/bench_chart.py target/bench-peer.json docs/bench-peer.svg
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
COLORS = {"p": "#d9622b", "q": "#3b75af"}


def main(src: str, dst: str) -> None:
    with open(src) as f:
        fig_data = json.load(f)
    batches = fig_data["batches"]
    labels = [f"{b['batch']:,}" for b in batches]
    p = [b["order_consumer_msgs_per_s"] for b in batches]
    q = [b["powertools_msgs_per_s"] for b in batches]
    cold = fig_data["cold_start_ms"]

    fig, (ax1, ax2) = plt.subplots(
        1, 2, figsize=(10, 4.2), gridspec_kw={"width_ratios": [3, 1.4]}
    )
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
    ax1.set_title("Throughput, first-time messages, warm process")
    ax1.legend(loc="upper left", fontsize=8)
    ax1.margins(y=0.15)

    c = [cold["order_consumer"], cold["powertools"]]
    b3 = ax2.bar([0, 1], c, 0.6, color=[COLORS["p"], COLORS["q"]])
    ax2.bar_label(b3, labels=[f"{v:,.0f} ms" for v in c], fontsize=8, padding=2)
    ax2.set_xticks([0, 1], ["order-consumer", "Powertools"])
    ax2.set_ylabel("ms")
    ax2.set_title("Cold start: spawn → first response")
    ax2.margins(y=0.15)

    fig.suptitle(
        "make bench, section peer: same Runtime API emulator, same local DynamoDB (dynoxide)",
        fontsize=9,
    )
    fig.text(0.5, 0.005, fig_data["machine"], ha="center", fontsize=7, color="#555")
    fig.tight_layout(rect=(0, 0.03, 1, 0.95))
    fig.savefig(dst, format="svg", metadata={"Date": None})


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: bench_chart.py FIGURES.json OUT.svg")
    main(sys.argv[1], sys.argv[2])
