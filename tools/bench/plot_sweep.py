#!/usr/bin/env python3
"""Heatmaps of a LinearLogp sweep (shardjit-bench linear-logp --sweep --out rows.jsonl).

One panel per mode (fwd, fwd+bwd) and dtype: rows are the heads (hidden x vocabulary shard),
columns the row counts N, each cell the op's time over the same-process cuBLAS GEMM's.
Given the rows of torch_compare.py --points instead, each cell is shardjit's time over PyTorch's
with materialized logits (below 1: shardjit faster), the last row of a cell where a file holds
several passes.

    python3 tools/bench/plot_sweep.py rows.jsonl -o docs/sweep.png
    python3 tools/bench/plot_sweep.py torch.jsonl -o docs/torch.png --run 2026-12-06T05
"""
import argparse
import json
import math
import sys


def load_rows(path, run=None):
    """The file's rows with a ratio (a sweep's), else torch_compare.py's as cells (torch_rows); with
    `run`, only the rows whose "run" starts with it (one pass of a file that holds several)."""
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
    if run is not None:
        rows = [r for r in rows if str(r.get("run", "")).startswith(run)]
    sweep = [r for r in rows if "ratio" in r]
    return sweep if sweep else torch_rows(rows)


def torch_rows(rows):
    """torch_compare.py's rows as cells: each shardjit variant's time over PyTorch's same variant,
    its head the shape's name less "-n<N>", its mode the variant's ("fwd", "fwd+bwd", ...)."""
    cells = []
    for r in rows:
        variant = r.get("variant", "")
        if variant.startswith("shardjit ") and r.get("over_torch") is not None:
            cells.append({"head": r["shape"].rsplit("-n", 1)[0], "hidden": r["hidden"], "vocab": r["vocab"],
                          "n": r["n"], "dtype": r["dtype"], "mode": variant[len("shardjit "):],
                          "ratio": r["over_torch"], "against": "PyTorch", "device": r.get("device"),
                          "date": str(r.get("run", "?"))[:10]})
    return cells


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
    parser.add_argument("--run", help="only the rows whose \"run\" starts with this (one pass of several in a file)")
    args = parser.parse_args()

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = load_rows(args.rows, args.run)
    if not rows:
        sys.exit(f"{args.rows}: no rows with a ratio (a sweep's) or an over_torch (torch_compare.py's)")
    against_torch = rows[0].get("against") == "PyTorch"
    panels = sorted({(r["mode"], r["dtype"]) for r in rows})
    fig, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), 0.45 * 16 + 2), squeeze=False)
    for ax, (mode, dtype) in zip(axes[0], panels):
        labels, ns, matrix = panel_grid([r for r in rows if r["mode"] == mode and r["dtype"] == dtype])
        values = [v for line in matrix for v in line if not math.isnan(v)]
        if against_torch:
            # Centred on a tie: green where shardjit is faster, red where PyTorch is.
            spread = max(abs(v - 1.0) for v in values) or 0.1
            floor = 1.0 - spread
            image = ax.imshow(matrix, cmap="RdYlGn_r", vmin=floor, vmax=1.0 + spread, aspect="auto")
        else:
            # The colour scale starts at the ideal: 1x the GEMM forward, 3x (three GEMMs) fwd+bwd.
            floor = 1.0 if mode == "fwd" else 3.0
            image = ax.imshow(matrix, cmap="viridis_r", vmin=floor, vmax=max(max(values), floor * 1.1), aspect="auto")
        ax.set_xticks(range(len(ns)), [str(n) for n in ns], rotation=45)
        ax.set_yticks(range(len(labels)), labels, fontsize=8)
        ax.set_xlabel("N (rows)")
        unit = "PyTorch's time (materialized logits)" if against_torch else "cuBLAS GEMM time"
        ax.set_title(f"{mode}, {dtype}: op time / {unit}")
        for i, line in enumerate(matrix):
            for j, v in enumerate(line):
                if not math.isnan(v):
                    dark = abs(v - 1.0) > 0.6 * (1.0 - floor) if against_torch else v > floor * 1.2
                    ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color="white" if dark else "black")
        fig.colorbar(image, ax=ax, shrink=0.8)
    first = rows[0]
    fig.suptitle(f"shardjit LinearLogp sweep, {first.get('device', '?')}, {first.get('date', '?')}")
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)
    print(f"wrote {args.output} ({len(rows)} points, {len(panels)} panels)")


if __name__ == "__main__":
    main()
