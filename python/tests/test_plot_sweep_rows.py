"""cpu tier: tools/bench/plot_sweep.py takes a sweep's rows as they are, and torch_compare.py's as
cells of shardjit's time over PyTorch's (no matplotlib needed for the rows)."""

import json

from conftest import bench_tool


def write(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def test_sweep_rows_are_taken_as_they_are(tmp_path):
    ps = bench_tool("plot_sweep")
    row = dict(head="llama3-8b", hidden=4096, vocab=128256, n=7, dtype="bf16", mode="fwd", ratio=1.02)
    failed = dict(head="llama3-8b", hidden=4096, vocab=128256, n=1, dtype="bf16", mode="fwd", status="failed")
    assert ps.load_rows(write(tmp_path / "sweep.jsonl", [row, failed])) == [row]


def test_torch_compare_rows_become_shardjit_over_pytorch_cells(tmp_path):
    ps = bench_tool("plot_sweep")
    base = dict(shape="llama3-70b/tp8-n333", n=333, hidden=8192, vocab=16032, dtype="bf16", device="H100",
                run="2026-12-06T05:52Z")
    rows = [dict(base, variant="gemm", over_gemm=1.0, over_torch=None),
            dict(base, variant="shardjit fwd", over_gemm=1.29, over_torch=0.94),
            dict(base, variant="shardjit fwd+bwd", over_gemm=4.14, over_torch=1.06),
            dict(base, variant="shardjit fwd+bwd", over_gemm=None, over_torch=None, status="out of memory"),
            dict(base, variant="torch fwd+bwd", over_gemm=3.9, over_torch=None)]
    cells = ps.load_rows(write(tmp_path / "torch.jsonl", rows))
    assert [(c["head"], c["n"], c["mode"], c["ratio"], c["against"], c["date"]) for c in cells] == [
        ("llama3-70b/tp8", 333, "fwd", 0.94, "PyTorch", "2026-12-06"),
        ("llama3-70b/tp8", 333, "fwd+bwd", 1.06, "PyTorch", "2026-12-06")]


def test_run_keeps_one_pass_of_a_file_that_holds_several(tmp_path):
    ps = bench_tool("plot_sweep")
    base = dict(shape="llama3-8b-n7", n=7, hidden=4096, vocab=128256, dtype="bf16", variant="shardjit fwd+bwd")
    path = write(tmp_path / "torch.jsonl", [dict(base, over_torch=0.98, run="2026-12-06T05:52Z"),
                                             dict(base, over_torch=1.01, run="2026-12-06T06:17Z")])
    assert [c["ratio"] for c in ps.load_rows(path, "2026-12-06T05")] == [0.98]
    assert [c["ratio"] for c in ps.load_rows(path)] == [0.98, 1.01]
