#!/usr/bin/env python3
"""Heatmaps of a LinearLogp sweep (shardjit-bench linear-logp --sweep --out rows.jsonl).

One panel per mode (fwd, fwd+bwd) and dtype: rows are the heads (hidden x vocabulary shard),
columns the row counts N, each cell the op's time over the same-process cuBLAS GEMM's.

    python3 tools/bench/plot_sweep.py rows.jsonl -o docs/sweep.png
"""
import argparse
import json
import math
import sys


def load_rows(path):
    rows = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                sys.exit(f"{path}:{number}: not a JSON row ({e})")
    return [r for r in rows if "ratio" in r]


def head_label(row):
    return f"{row.get('head', '?')} ({row['hidden']}x{row['vocab']})"


def panel_grid(rows):
    """The heads (sorted by hidden, vocabulary), the row counts and a ratio matrix (NaN: no point)."""
    heads = sorted({(r["hidden"], r["vocab"], head_label(r)) for r in rows})
    ns = sorted({r["n"] for r in rows})
    matrix = [[math.nan] * len(ns) for _ in heads]
    index = {h[2]: i for i, h in enumerate(heads)}
    for r in rows:
        matrix[index[head_label(r)]][ns.index(r["n"])] = r["ratio"]
    return [h[2] for h in heads], ns, matrix


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("rows", help="JSONL rows of the sweep")
    parser.add_argument("-o", "--output", default="sweep.png", help="PNG to write")
    args = parser.parse_args()

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = load_rows(args.rows)
    if not rows:
        sys.exit(f"{args.rows}: no rows with a ratio")
    panels = sorted({(r["mode"], r["dtype"]) for r in rows})
    fig, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), 0.45 * 16 + 2), squeeze=False)
    for ax, (mode, dtype) in zip(axes[0], panels):
        labels, ns, matrix = panel_grid([r for r in rows if r["mode"] == mode and r["dtype"] == dtype])
        # The colour scale starts at the ideal: 1x the GEMM forward, 3x (three GEMMs) fwd+bwd.
        floor = 1.0 if mode == "fwd" else 3.0
        values = [v for line in matrix for v in line if not math.isnan(v)]
        image = ax.imshow(matrix, cmap="viridis_r", vmin=floor, vmax=max(max(values), floor * 1.1), aspect="auto")
        ax.set_xticks(range(len(ns)), [str(n) for n in ns], rotation=45)
        ax.set_yticks(range(len(labels)), labels, fontsize=8)
        ax.set_xlabel("N (rows)")
        ax.set_title(f"{mode}, {dtype}: op time / cuBLAS GEMM time")
        for i, line in enumerate(matrix):
            for j, v in enumerate(line):
                if not math.isnan(v):
                    ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color="white" if v > floor * 1.2 else "black")
        fig.colorbar(image, ax=ax, shrink=0.8)
    first = rows[0]
    fig.suptitle(f"shardjit LinearLogp sweep, {first.get('device', '?')}, {first.get('date', '?')}")
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)
    print(f"wrote {args.output} ({len(rows)} points, {len(panels)} panels)")


if __name__ == "__main__":
    main()
