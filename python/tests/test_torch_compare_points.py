"""cpu tier (needs torch; skipped by name without it): tools/bench/torch_compare.py reads the
points of a sweep as shardjit-bench lists them, one shape per head, N and dtype, and refuses
rows that are not points by file and line, and a file with none."""

import json

import pytest
from conftest import bench_tool

pytest.importorskip("torch", reason="torch_compare needs PyTorch")


def torch_compare():
    return bench_tool("torch_compare")


def write(path, rows):
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))
    return str(path)


def test_points_give_one_shape_per_head_rows_and_dtype(tmp_path):
    tc = torch_compare()
    point = dict(head="qwen2.5-7b/tokens", n=333, hidden=3584, vocab=152064, valid_vocab=151665, dtype="bf16",
                 mode="fwd", tp=1, estimated_s=0.5)
    rows = [point, dict(point, mode="fwd+bwd"), dict(point, dtype="fp16"),
            dict(head="llama3-70b/tp8", n=7, hidden=8192, vocab=16032, dtype="bf16", mode="fwd", tp=8), ""]
    shapes = tc.load_points(write(tmp_path / "points.jsonl", rows))
    assert shapes == [tc.Shape("qwen2.5-7b/tokens-n333", 333, 3584, 152064, "bf16", 151665),
                      tc.Shape("qwen2.5-7b/tokens-n333", 333, 3584, 152064, "fp16", 151665),
                      tc.Shape("llama3-70b/tp8-n7", 7, 8192, 16032, "bf16", 0)]


def test_rows_select_the_points_of_those_row_counts(tmp_path):
    tc = torch_compare()
    point = dict(head="llama3-8b", n=333, hidden=4096, vocab=128256, dtype="bf16", mode="fwd+bwd", tp=1)
    path = write(tmp_path / "points.jsonl", [point, dict(point, n=256), dict(point, n=1024)])
    assert [s.n for s in tc.load_points(path, {256, 333})] == [333, 256]
    with pytest.raises(SystemExit, match="no sweep points of 7 rows"):
        tc.load_points(path, {7})
    assert tc.parse_rows("256,333") == {256, 333}
    for bad in ("256;333", "0", ""):
        with pytest.raises(Exception, match="--rows"):
            tc.parse_rows(bad)


@pytest.mark.parametrize("row, says", [
    ("not json", "points.jsonl:1: expected a sweep point"),
    (dict(head="h", n=7, hidden=64), "points.jsonl:1: expected a sweep point"),
    (dict(head="h", n=7, hidden=64, vocab=300, dtype="int8"), "points.jsonl:1: dtype 'int8': expected one of"),
])
def test_rows_that_are_not_points_are_refused_by_line(tmp_path, row, says):
    tc = torch_compare()
    with pytest.raises(SystemExit, match=says):
        tc.load_points(write(tmp_path / "points.jsonl", [row]))


def test_a_file_without_points_is_refused(tmp_path):
    # (A dry run that failed leaves an empty file: timing nothing must not look like a run.)
    tc = torch_compare()
    with pytest.raises(SystemExit, match="points.jsonl: no sweep points"):
        tc.load_points(write(tmp_path / "points.jsonl", [""]))


def test_summary_lists_the_shapes_where_shardjit_is_not_faster_worst_first(tmp_path):
    tc = torch_compare()

    def rows(shape, n, shardjit_us, torch_us, gemm_us=100.0):
        base = dict(shape=shape, n=n, hidden=4096, vocab=128256, dtype="bf16")
        out = [dict(base, variant="gemm", over_gemm=1.0, over_torch=None, peak_extra_gib=0.0)]
        if torch_us is not None:
            out.append(dict(base, variant="torch fwd+bwd", over_gemm=torch_us / gemm_us, over_torch=None,
                            peak_extra_gib=2.0))
        out.append(dict(base, variant="shardjit fwd+bwd", over_gemm=shardjit_us / gemm_us,
                        over_torch=None if torch_us is None else shardjit_us / torch_us, peak_extra_gib=0.5))
        return out

    host = dict(variant="host overhead", n=7, hidden=4096, vocab=128256)  # a default run's first row: no shape
    lines = tc.summary_lines([host] + rows("a-n7", 7, 300.0, 400.0) + rows("b-n16384", 16384, 420.0, 350.0)
                             + rows("c-n333", 333, 330.0, 300.0) + rows("d-n32768", 32768, 400.0, None), worst=1)
    assert lines[0] == ("shardjit fwd+bwd over PyTorch's: 3 shapes, median 1.100, max 1.200; not faster at 2; "
                        "1 without a PyTorch time (out of memory)")
    # Only the worst of the two is listed (worst=1), with both ratios to the GEMM and both memories.
    assert lines[1:] == ["  1.200  b-n16384 bf16 (N 16384, H 4096, V 128256): 4.20 x GEMM against 3.50, "
                         "extra 0.50 against 2.00 GiB"]


def test_summary_of_one_shape_says_shape():
    tc = torch_compare()
    base = dict(shape="a-n7", n=7, hidden=64, vocab=300, dtype="bf16", peak_extra_gib=0.0)
    lines = tc.summary_lines([dict(base, variant="torch fwd", over_gemm=1.2, over_torch=None),
                              dict(base, variant="shardjit fwd", over_gemm=1.0, over_torch=0.8)])
    assert lines == ["shardjit fwd over PyTorch's: 1 shape, median 0.800, max 0.800; not faster at 0"]
