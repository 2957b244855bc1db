"""cpu tier: version, Runtime options, prewarm into a cache folder."""

import logging
import time

import shardjit
import pytest


def test_version():
    assert shardjit.__version__.count(".") == 2
    assert shardjit._shardjit.version() == shardjit.__version__


def test_runtime_cache_dir(tmp_path):
    rt = shardjit.Runtime(cache_dir=str(tmp_path / "c"), jit=False)
    assert rt.cache_dir == str(tmp_path / "c")
    assert rt.jit_enabled is False
    assert rt.cache_entries() == []


def test_runtime_autotune_option(tmp_path, monkeypatch):
    shardjit.Runtime(cache_dir=str(tmp_path / "c"), jit=False, autotune=True)
    monkeypatch.setenv("SHARDJIT_AUTOTUNE", "sometimes")
    with pytest.raises(shardjit.InvalidArgumentError, match="SHARDJIT_AUTOTUNE"):
        shardjit.Runtime(cache_dir=str(tmp_path / "c"), jit=False)
    shardjit.Runtime(cache_dir=str(tmp_path / "c"), jit=False, autotune=False)


def test_prewarm_fills_the_cache(tmp_path):
    cache = str(tmp_path / "cache")
    first = shardjit.prewarm(64, 300, archs=["sm_80"], cache_dir=cache, jobs=2)
    assert first["failed"] == 0, first["failures"]
    assert first["missing"] == []
    assert first["total"] > 0 and first["compiled"] == first["total"]
    entries = shardjit.Runtime(cache_dir=cache).cache_entries()
    assert len(entries) == first["total"]
    assert all(e["arch"] == "sm_80" and e["size_bytes"] > 0 for e in entries)
    again = shardjit.prewarm(64, 300, archs=["sm_80"], cache_dir=cache)
    assert again["cached"] == again["total"] == first["total"]


def test_prewarm_names_the_kernels_its_size_cap_evicted(tmp_path, monkeypatch):
    monkeypatch.setenv("SHARDJIT_CACHE_MAX_BYTES", "1")
    result = shardjit.prewarm(64, 300, archs=["sm_80"], cache_dir=str(tmp_path / "cache"))
    assert result["failed"] == 0 and result["compiled"] == result["total"] >= 2
    # Each store keeps only the entry it has just written.
    assert len(result["missing"]) == result["total"] - 1
    assert all("SHARDJIT_CACHE_MAX_BYTES" in message for message in result["missing"])


def test_prewarm_follows_the_hopper_switch(tmp_path, monkeypatch):
    def forwards(cache):
        """The forward kernels' templates: linear_logp_fwd_hopper and linear_logp_fwd_rows_as_n on the Hopper
        loop, else linear_logp_fwd."""
        entries = shardjit.Runtime(cache_dir=cache).cache_entries()
        return {e["spec"].split("<")[0] for e in entries if e["spec"].startswith("linear_logp_fwd")}

    on = str(tmp_path / "on")
    assert shardjit.prewarm(64, 300, archs=["sm_90a"], cache_dir=on)["failed"] == 0
    assert forwards(on) == {"linear_logp_fwd_hopper", "linear_logp_fwd_rows_as_n"}
    off = str(tmp_path / "off")
    assert shardjit.prewarm(64, 300, archs=["sm_90a"], cache_dir=off, hopper_path=False)["failed"] == 0
    assert forwards(off) == {"linear_logp_fwd"}
    monkeypatch.setenv("SHARDJIT_HOPPER_PATH", "0")
    env_off = str(tmp_path / "env_off")
    assert shardjit.prewarm(64, 300, archs=["sm_90a"], cache_dir=env_off)["failed"] == 0
    assert forwards(env_off) == {"linear_logp_fwd"}


def test_prewarm_bad_arguments(tmp_path):
    cache = str(tmp_path / "cache")
    with pytest.raises(ValueError, match="archs"):
        shardjit.prewarm(64, 300, archs=[], cache_dir=cache)
    with pytest.raises(ValueError, match="entropy: expected at least one value"):
        shardjit.prewarm(64, 300, archs=["sm_80"], entropy=[], cache_dir=cache)
    with pytest.raises(ValueError, match="dtypes"):
        shardjit.prewarm(64, 300, archs=["sm_80"], dtypes=["fp8"], cache_dir=cache)
    with pytest.raises(shardjit.InvalidArgumentError) as caught:
        shardjit.prewarm(64, 300, archs=["sm_80"], tp=[0], cache_dir=cache)
    assert caught.value.code == "invalid_argument"


def test_prewarm_collectives_add_the_collective_kernels(tmp_path):
    plain = shardjit.prewarm(64, 300, archs=["sm_80"], tp=[1, 2], cache_dir=str(tmp_path / "plain"), jobs=2)
    cache = str(tmp_path / "collectives")
    both = shardjit.prewarm(64, 300, archs=["sm_80"], tp=[1, 2], collectives=True, cache_dir=cache, jobs=2)
    assert plain["failed"] == 0 and both["failed"] == 0, both["failures"]
    # At TP 2 and one dtype: the reduce-scatter kernel and the MoE combine with and without gates;
    # at TP 1 (a group of one rank, whose reduce-scatter is a copy) the MoE combine's two only.
    assert both["total"] == plain["total"] + 5
    specs = [e["spec"] for e in shardjit.Runtime(cache_dir=cache).cache_entries()]
    assert sum(s.startswith("reduce_scatter") for s in specs) == 1
    assert sum(s.startswith("moe_combine") for s in specs) == 4


def test_prewarm_backward_variants_add_kernels(tmp_path):
    cache = str(tmp_path / "cache")
    plain = shardjit.prewarm(64, 300, archs=["sm_80"], backward=True, cache_dir=cache, jobs=2)
    variants = shardjit.prewarm(64, 300, archs=["sm_80"], backward=True, dz_fp32=True, grad_filter=True,
                                cache_dir=cache, jobs=2)
    assert plain["failed"] == 0 and variants["failed"] == 0
    assert variants["total"] > plain["total"]
    assert variants["cached"] == plain["total"]


def test_library_log_lines_reach_python_logging(tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="shardjit")
    monkeypatch.setenv("SHARDJIT_LOG_LEVEL", "info")
    result = shardjit.prewarm(64, 300, archs=["sm_80"], cache_dir=str(tmp_path / "cache"), jobs=2)
    assert result["compiled"] > 0

    def compiled_lines():
        return [r for r in caplog.records if r.name == "shardjit" and r.getMessage().startswith("compiled ")]

    deadline = time.monotonic() + 30  # the lines come from the forwarding thread
    while len(compiled_lines()) < result["compiled"] and time.monotonic() < deadline:
        time.sleep(0.05)
    shardjit.Runtime(cache_dir=str(tmp_path / "cache"), jit=False, log_level="warn")  # the level back
    lines = compiled_lines()
    assert len(lines) == result["compiled"], [r.getMessage() for r in caplog.records]
    assert all(r.levelno == logging.INFO and "sm_80" in r.getMessage() for r in lines)
