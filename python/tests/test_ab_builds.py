"""cpu tier: tools/bench/ab_builds.py, the A/B harness, over a stand-in benchmark (a script that
prints a JSON row whose fused_ms comes from its environment and logs each call): variants run in
alternating order, with their own environment, rows labelled, failures kept, medians and ratios."""

import io
import json
import stat
import sys
import textwrap

import pytest
from conftest import bench_tool


@pytest.fixture(scope="module")
def ab():
    return bench_tool("ab_builds")


@pytest.fixture
def fake_bench(tmp_path):
    """An executable that appends `LABEL ARGS` to calls.log and prints a row: fused_ms from
    FAKE_MS (default 1.0) times the number after --n; exits 3 when FAKE_FAIL is set."""
    log = tmp_path / "calls.log"
    script = tmp_path / "fake-bench"
    script.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import json, os, sys
        args = sys.argv[1:]
        with open({str(log)!r}, "a") as f:
            f.write(os.environ.get("FAKE_LABEL", "?") + " " + " ".join(args) + "\\n")
        if os.environ.get("FAKE_FAIL"):
            sys.stderr.write("boom\\n")
            sys.exit(3)
        n = float(args[args.index("--n") + 1])
        print("compiling...")
        print(json.dumps({{"fused_ms": float(os.environ.get("FAKE_MS", "1.0")) * n, "gemm_ms": n}}))
        """))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script, log


def test_a_variant_is_a_label_a_binary_and_settings(ab):
    v = ab.parse_variant("walk-off=/x/shardjit-bench SHARDJIT_FWD_WALK=0 'A=b c'")
    assert (v.label, v.binary, v.env) == ("walk-off", "/x/shardjit-bench", {"SHARDJIT_FWD_WALK": "0", "A": "b c"})
    for bad in ["", "nolabel", "=bin", "x=", "x=bin NOTASETTING"]:
        with pytest.raises(ValueError):
            ab.parse_variant(bad)


def test_rounds_alternate_the_order_and_label_the_rows(ab, fake_bench, tmp_path):
    script, log = fake_bench
    variants = [ab.parse_variant(f"base={script} FAKE_LABEL=base FAKE_MS=2"),
                ab.parse_variant(f"new={script} FAKE_LABEL=new FAKE_MS=1.5")]
    cases = ["linear-logp --n 3", "linear-logp --n 5 --backward"]
    out_path = tmp_path / "ab.jsonl"
    with open(out_path, "w") as out:
        rows = ab.run_rounds(variants, cases, rounds=3, out=out)
    calls = log.read_text().splitlines()
    assert calls == ["base linear-logp --n 3", "new linear-logp --n 3",
                     "base linear-logp --n 5 --backward", "new linear-logp --n 5 --backward",
                     "new linear-logp --n 3", "base linear-logp --n 3",
                     "new linear-logp --n 5 --backward", "base linear-logp --n 5 --backward",
                     "base linear-logp --n 3", "new linear-logp --n 3",
                     "base linear-logp --n 5 --backward", "new linear-logp --n 5 --backward"]
    written = [json.loads(line) for line in out_path.read_text().splitlines()]
    assert written == rows
    assert [(r["variant"], r["case_index"], r["round"]) for r in rows[:4]] == [
        ("base", 0, 1), ("new", 0, 1), ("base", 1, 1), ("new", 1, 1)]
    assert rows[0]["fused_ms"] == pytest.approx(6.0) and rows[1]["fused_ms"] == pytest.approx(4.5)
    summary = ab.summarize(rows, variants, cases)
    (case0, entries0), (case1, entries1) = summary
    assert case0 == cases[0] and case1 == cases[1]
    assert entries0[0] == ("base", pytest.approx(6.0), 3, pytest.approx(1.0))
    assert entries0[1] == ("new", pytest.approx(4.5), 3, pytest.approx(0.75))
    assert entries1[1][1] == pytest.approx(7.5)


def test_a_failing_process_gives_a_failed_row_and_the_run_goes_on(ab, fake_bench, capsys):
    script, log = fake_bench
    status = ab.main(["--variant", f"ok={script}", "--variant", f"broken={script} FAKE_FAIL=1",
                      "--case", "linear-logp --n 2", "--rounds", "2"])
    assert status == 1
    assert len(log.read_text().splitlines()) == 4
    printed = capsys.readouterr().out
    assert "ok" in printed and "broken" in printed and "failed" in printed


def test_rows_without_json_fail_and_a_missing_binary_fails(ab, tmp_path):
    quiet = tmp_path / "quiet"
    quiet.write_text(f"#!{sys.executable}\nprint('no row here')\n")
    quiet.chmod(quiet.stat().st_mode | stat.S_IEXEC)
    row = ab.run_one(ab.Variant("q", str(quiet)), "linear-logp", 60)
    assert row["status"] == "failed" and row["rc"] == 0
    row = ab.run_one(ab.Variant("m", str(tmp_path / "absent")), "linear-logp", 60)
    assert row["status"] == "failed" and "error" in row


def test_the_command_line_refuses_repeated_labels(ab, fake_bench):
    script, _ = fake_bench
    with pytest.raises(SystemExit):
        ab.main(["--variant", f"a={script}", "--variant", f"a={script}", "--case", "x --n 1"])
    with pytest.raises(SystemExit):
        ab.main(["--variant", f"a={script}", "--case", "x --n 1", "--rounds", "0"])


def test_last_json_row_skips_other_lines(ab):
    assert ab.last_json_row('x\n{"a": 1}\n{not json\nlog line\n') == {"a": 1}
    assert ab.last_json_row("[1, 2]\n") is None
    assert ab.last_json_row("") is None


def test_rows_with_the_forwards_plan_show_it_and_the_cost_models_ratio(ab):
    variants = [ab.Variant("rule", "x"), ab.Variant("wide", "x")]
    cases = ["linear-logp --n 4097", "linear-logp --n 7"]
    rule_plan = dict(rows_as_n=168, tile_rows=168, tile_cols=256, splits=5, model_time=120.0)
    wide_plan = dict(rows_as_n=0, tile_rows=128, tile_cols=256, splits=4, model_time=126.0)
    rows = [dict(variant="rule", case_index=0, round=1, fused_ms=12.8, fwd_plan=rule_plan),
            dict(variant="wide", case_index=0, round=1, fused_ms=12.1, fwd_plan=wide_plan),
            dict(variant="rule", case_index=1, round=1, fused_ms=0.1),  # a row without a plan
            dict(variant="wide", case_index=1, round=1, fused_ms=0.1)]
    plans = ab.forward_plans(rows, variants, cases)
    assert plans == [{"rule": rule_plan, "wide": wide_plan}, {"rule": None, "wide": None}]
    out = io.StringIO()
    ab.print_summary(ab.summarize(rows, variants, cases), "fused_ms", file=out, plans=plans)
    lines = out.getvalue().splitlines()
    assert lines[1].endswith("x1.0000  N168x256/5 model x1.0000")
    assert lines[2].endswith("x0.9453  M128x256/4 model x1.0500")
    assert lines[4].endswith("x1.0000")
