"""The GPU targets of a bundle's Triton kernels through the package: shown by list() and
verify(), checked by load() and warm() against the host's (gpu_targets= here: this
machine has no GPU), refused with nothing installed, or left out with
skip_other_gpus=True."""

import os
import warnings

import pytest

import megacache
from conftest import tool, tree


@pytest.fixture
def v1(tmp_path, cuda_cache, keys):
    """The same cache in bundle format 1, which records no targets."""
    b = tmp_path / "v1.mcache"
    tool("pack", "-q", "-o", str(b), "-s", keys.sec, "--format-version", "1", "--from-dir",
         cuda_cache)
    return b


def kernel_files(root):
    return sorted(p for p in tree(root) if p.startswith("triton" + os.sep))


def test_targets_listed_and_verified(bundle, v1, keys):
    assert megacache.list(bundle).gpu_targets == ["cuda:90"]
    assert megacache.verify(bundle, keys.pub).gpu_targets == ["cuda:90"]
    # Format 1 records none: not known from the manifest, read by a verify.
    assert megacache.list(v1).gpu_targets is None
    assert megacache.verify(v1, keys.pub).gpu_targets == ["cuda:90"]


@pytest.mark.parametrize("which", ["bundle", "v1"])
def test_other_gpu_refused_with_nothing_installed(tmp_path, bundle, v1, keys, which):
    b = bundle if which == "bundle" else v1
    cache = tmp_path / "cache"
    with pytest.raises(megacache.GpuMismatchError) as e:
        megacache.load(b, keys.pub, cache_dir=cache, gpu_targets=["cuda:80"])
    assert e.value.status == "gpu_mismatch"
    assert isinstance(e.value, megacache.VerificationError)
    assert "for cuda:90, a GPU target this host lacks (this host: cuda:80)" in str(e.value)
    assert not cache.exists()


def test_skip_other_gpus_leaves_every_kernel_out(tmp_path, bundle, cuda_cache, keys):
    cache = tmp_path / "cache"
    r = megacache.load(bundle, keys.pub, cache_dir=cache, gpu_targets="cuda:80",
                       skip_other_gpus=True)
    assert (r.gpu_targets, r.host_gpu_targets, r.gpu_targets_checked) == (
        ["cuda:90"], ["cuda:80"], True)
    assert r.skipped == len(kernel_files(cuda_cache)) == 128
    assert {a.type for a in r.artifacts if a.action == "skipped"} == {"triton"}
    assert kernel_files(cache) == []
    rest = {p: h for p, h in tree(cuda_cache).items() if not p.startswith("triton" + os.sep)}
    assert tree(cache) == rest


def test_same_target_loads_everything(tmp_path, bundle, cuda_cache, keys):
    cache = tmp_path / "cache"
    r = megacache.load(bundle, keys.pub, cache_dir=cache, gpu_targets=["cuda:90"])
    assert r.gpu_targets_checked and r.skipped == 0
    assert tree(cache) == tree(cuda_cache)


@pytest.mark.skipif(os.path.exists("/sys/class/kfd") or os.path.exists("/dev/nvidiactl"),
                    reason="a GPU driver is present")
def test_no_gpu_installs_everything_and_warns(tmp_path, bundle, cuda_cache, keys):
    assert megacache.gpu_targets() == []
    cache = tmp_path / "cache"
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = megacache.load(bundle, keys.pub, cache_dir=cache)
    assert not r.gpu_targets_checked and r.host_gpu_targets == []
    # the tool's words, up to the hint on how to name the targets, which names no argument
    said = tool("load", str(bundle), "-p", keys.pub, "--cache-dir", str(tmp_path / "c2"),
                "--dry-run").stderr
    line = [x for x in said.splitlines() if "GPU targets not checked" in x]
    assert len(line) == 1 and line[0].startswith("megacache: warning: "), said
    fact = line[0][len("megacache: warning: "):].split("; ")[0]
    assert [str(x.message) for x in w if issubclass(x.category, megacache.GpuTargetsNotChecked)] \
        == ["megacache: %s: %s; give this host's targets to check them)" % (bundle, fact)]
    assert tree(cache) == tree(cuda_cache)


def test_bad_target_is_a_usage_error(tmp_path, bundle, keys):
    with pytest.raises(megacache.UsageError, match="'sm_90' is not a GPU target"):
        megacache.load(bundle, keys.pub, cache_dir=tmp_path / "c", gpu_targets=["sm_90"])
    assert not (tmp_path / "c").exists()


def test_warm_refuses_or_goes_cold(tmp_path, bundle, keys, with_env):
    cache = tmp_path / "cache"
    with_env(str(cache))
    with pytest.raises(megacache.GpuMismatchError):
        with megacache.warm(bundle, keys.pub, gpu_targets=["cuda:80"]):
            pytest.fail("the block ran after a refusal")
    with megacache.warm(bundle, keys.pub, gpu_targets=["cuda:80"], allow_cold=True) as w:
        assert not cache.exists()
    assert w.loaded == [] and len(w.cold) == 1
    assert "holds Triton kernels for cuda:90" in w.cold[0][1]
    with megacache.warm(bundle, keys.pub, gpu_targets=["cuda:80"], skip_other_gpus=True) as w:
        assert kernel_files(cache) == []
    assert w.loaded[0].skipped == 128
