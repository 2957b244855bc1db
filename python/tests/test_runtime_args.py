"""cpu tier: Runtime(...) and prewarm(...) refuse wrong arguments by name, and paths with a NUL byte."""

import os

import pytest

shardjit = pytest.importorskip("shardjit")


def test_runtime_options_are_checked_by_name(tmp_path):
    cache = str(tmp_path / "c")
    with pytest.raises(ValueError, match=r"cache_max_bytes: -1 is out of range"):
        shardjit.Runtime(cache_dir=cache, cache_max_bytes=-1)
    with pytest.raises(ValueError, match=r"cache_max_bytes: \d+ is out of range"):
        shardjit.Runtime(cache_dir=cache, cache_max_bytes=2**70)
    with pytest.raises(TypeError, match="jit: expected True, False or None, got int"):
        shardjit.Runtime(cache_dir=cache, jit=0)
    with pytest.raises(TypeError, match="cache_max_bytes: expected an int, got bool"):
        shardjit.Runtime(cache_dir=cache, cache_max_bytes=True)
    with pytest.raises(TypeError, match="cache_dir: expected a path"):
        shardjit.Runtime(cache_dir=3)
    with pytest.raises(TypeError, match="log_level: expected a str or None, got int"):
        shardjit.Runtime(cache_dir=cache, log_level=1)
    with pytest.raises(ValueError, match=r"compile_jobs: -1 is out of range"):
        shardjit.Runtime(cache_dir=cache, compile_jobs=-1)
    with pytest.raises(TypeError, match="compile_jobs: expected an int, got float"):
        shardjit.Runtime(cache_dir=cache, compile_jobs=2.0)
    assert shardjit.Runtime(cache_dir=cache, jit=False, compile_jobs=2).jit_enabled is False
    # os.PathLike is a path too.
    assert shardjit.Runtime(cache_dir=tmp_path / "p", jit=False).cache_dir == str(tmp_path / "p")


@pytest.mark.parametrize("option", ["cache_dir", "template_dir", "dump_dir"])
def test_a_nul_byte_in_a_path_is_refused(tmp_path, option):
    kwargs = {"cache_dir": str(tmp_path / "c")}
    kwargs[option] = str(tmp_path / "nul") + "\x00suffix"
    with pytest.raises(ValueError, match="NUL"):
        shardjit.Runtime(**kwargs)
    assert not os.path.exists(tmp_path / "nul")


def test_prewarm_refuses_a_nul_byte_in_cache_dir(tmp_path):
    with pytest.raises(ValueError, match="NUL"):
        shardjit.prewarm(64, 300, archs=["sm_80"], cache_dir=str(tmp_path / "nul") + "\x00suffix")
    assert not os.path.exists(tmp_path / "nul")


def test_prewarm_arguments_are_checked_by_name(tmp_path):
    cache = str(tmp_path / "c")
    with pytest.raises(TypeError, match="hidden: expected an int, got NoneType"):
        shardjit.prewarm(None, 300, archs=["sm_80"], cache_dir=cache)
    with pytest.raises(ValueError, match="hidden: 1180591620717411303424 is out of range"):
        shardjit.prewarm(2**70, 300, archs=["sm_80"], cache_dir=cache)
    with pytest.raises(ValueError, match="vocab: -9223372036854775809 is out of range"):
        shardjit.prewarm(64, -(2**63) - 1, archs=["sm_80"], cache_dir=cache)
    with pytest.raises(TypeError, match=r"archs: expected a list of arch names such as \['sm_80'\], got str"):
        shardjit.prewarm(64, 300, archs="sm_80", cache_dir=cache)
    with pytest.raises(TypeError, match="tp: expected an int, got str"):
        shardjit.prewarm(64, 300, archs=["sm_80"], tp=["2"], cache_dir=cache)
    with pytest.raises(TypeError, match="backward: expected True or False, got int"):
        shardjit.prewarm(64, 300, archs=["sm_80"], backward=1, cache_dir=cache)
    with pytest.raises(TypeError, match="jobs: expected an int, got float"):
        shardjit.prewarm(64, 300, archs=["sm_80"], jobs=2.0, cache_dir=cache)
    assert not os.path.exists(cache)


@pytest.mark.parametrize("arch", ["sm_75", "bogus"])
def test_prewarm_refuses_an_arch_nvrtc_cannot_build_for(tmp_path, arch):
    cache = str(tmp_path / "c")
    with pytest.raises(ValueError, match=f"archs: unknown or unsupported compile target '{arch}'"):
        shardjit.prewarm(64, 300, archs=["sm_80", arch], cache_dir=cache)
    assert not os.path.exists(cache)


@pytest.mark.parametrize("variant", ["dz_fp32", "grad_filter"])
def test_prewarm_backward_variants_need_the_backward(tmp_path, variant):
    cache = str(tmp_path / "c")
    with pytest.raises(ValueError, match=variant + " adds variants of the backward's kernels; expected backward"):
        shardjit.prewarm(64, 300, archs=["sm_80"], cache_dir=cache, **{variant: True})
    assert not os.path.exists(cache)
