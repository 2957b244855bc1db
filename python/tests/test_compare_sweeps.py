"""cpu tier: tools/bench/compare_sweeps.py matches two sweeps' points (head, rows, shape, dtype,
mode, entropy), orders their moves, and counts each sweep's points over the sweep's goals."""

import io
import json

import pytest
from conftest import bench_tool


@pytest.fixture(scope="module")
def cs():
    return bench_tool("compare_sweeps")


def row(n, ratio, mode="fwd", head="h", dtype="bf16", **extra):
    return dict(head=head, tp=1, n=n, hidden=4096, vocab=32000, dtype=dtype, mode=mode, entropy=False, ratio=ratio,
                **extra)


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "\n")
    return str(path)


def test_points_match_on_shape_dtype_mode_and_padding(cs, tmp_path):
    before = cs.load(write(tmp_path / "a.jsonl", [row(7, 1.2), row(7, 1.0, dtype="fp16"), row(7, 1.5, valid_vocab=31990),
                                                  {"note": "no ratio"}]))
    after = cs.load(write(tmp_path / "b.jsonl", [row(7, 0.9), row(7, 1.1, dtype="fp16"), row(4096, 1.0)]))
    moves = cs.compare(before, after)
    assert list(moves) == ["fwd"]
    assert [(k[2], k[6], m) for k, _, _, m in moves["fwd"]] == [(7, "bf16", pytest.approx(0.75)),
                                                                 (7, "fp16", pytest.approx(1.1))]


def test_the_last_row_of_a_point_wins_and_bad_lines_name_their_place(cs, tmp_path):
    points = cs.load(write(tmp_path / "a.jsonl", [row(7, 1.2), row(7, 1.1)]))
    assert [r["ratio"] for r in points.values()] == [1.1]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(row(7, 1.0)) + "\n{oops\n")
    with pytest.raises(SystemExit, match="bad.jsonl:2"):
        cs.load(str(bad))


def test_goals_count_the_points_over_each_limit(cs, tmp_path):
    points = cs.load(write(tmp_path / "a.jsonl", [
        row(1024, 1.06), row(4096, 1.05), row(16384, 1.2, head="g"),  # fwd from 1024 rows: two over 1.05
        row(333, 1.11), row(7, 1.10),  # fwd below 1024 rows: one over 1.10
        row(1024, 4.01, mode="fwd+bwd"), row(333, 5.0, mode="fwd+bwd"),  # fwd+bwd: only N >= 1024 counts
    ]))
    assert cs.goal_misses(points) == [("fwd", "N >= 1024", 1.05, 2, 3), ("fwd", "N < 1024", 1.10, 1, 2),
                                      ("fwd+bwd", "N >= 1024", 4.0, 1, 1)]


def test_the_report_lists_the_largest_moves_and_the_goals(cs, tmp_path):
    before = cs.load(write(tmp_path / "a.jsonl", [row(n, 1.0) for n in (1, 7, 333, 4096)]))
    after = cs.load(write(tmp_path / "b.jsonl", [row(1, 1.3), row(7, 0.8), row(333, 1.0), row(4096, 1.06)]))
    out = io.StringIO()
    cs.report(before, after, worst=1, out=out)
    text = out.getvalue()
    assert "4 points in both sweeps, 0 in one only" in text
    up = text.index("moved up most")
    down = text.index("moved down most")
    assert "1.300  1.000 -> 1.300  h N 1 " in text[up:down]
    assert "0.800  1.000 -> 0.800  h N 7 " in text[down:]
    assert "fwd N >= 1024 over 1.05: before 0/1, after 1/1" in text
    assert "fwd+bwd" not in text.split("goals")[1]


def test_the_command_line_refuses_sweeps_without_points(cs, tmp_path):
    empty = write(tmp_path / "empty.jsonl", [])
    full = write(tmp_path / "full.jsonl", [row(7, 1.0)])
    with pytest.raises(SystemExit):
        cs.main([empty, full])
    assert cs.main([full, full, "--worst", "0"]) == 0


def test_points_that_ran_another_plan_set_the_measured_move_beside_the_cost_models(cs, tmp_path):
    def plan(rows_as_n, rows, cols, splits, model):
        return dict(rows_as_n=rows_as_n, tile_rows=rows, tile_cols=cols, splits=splits, model_time=model)
    wide = plan(0, 128, 256, 4, 126.0)
    before = cs.load(write(tmp_path / "a.jsonl", [
        row(4097, 1.05, fwd_plan=plan(168, 168, 256, 5, 120.0)),
        row(400, 1.00, fwd_plan=plan(136, 136, 256, 44, 13.4)),
        row(333, 1.00, fwd_plan=wide),  # the same plan after: not a plan move
        row(7, 1.00),  # no plan: left out
    ]))
    after = cs.load(write(tmp_path / "b.jsonl", [
        row(4097, 1.00, fwd_plan=wide), row(400, 1.20, fwd_plan=dict(wide, model_time=16.0)),
        row(333, 0.90, fwd_plan=wide), row(7, 0.9, fwd_plan=wide),
    ]))
    moves = cs.model_moves(before, after)
    assert list(moves) == ["fwd"]
    # 4097 rows: measured 0.952, model 1.050 (a disagreement of 10 %); 400 rows: 1.2 against 1.194.
    assert [(k[2], a, b) for k, _, _, a, b in moves["fwd"]] == [(4097, "N168x256/5", "M128x256/4"),
                                                                  (400, "N136x256/44", "M128x256/4")]
    assert moves["fwd"][0][1:3] == (pytest.approx(1.00 / 1.05), pytest.approx(126.0 / 120.0))
    out = io.StringIO()
    cs.report(before, after, worst=1, out=out)
    text = out.getvalue()
    assert "fwd: 2 points ran another plan, after / before median 1.076, the cost model's 1.122" in text
    assert "0.952 (model 1.050)  N168x256/5 -> M128x256/4  h N 4097 " in text
    assert "N 400 " not in text.split("ran another plan")[1].split("goals")[0]
