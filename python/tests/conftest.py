"""Shared by the tests of the megacache package: the tool to compare with, the test
keys, real torch 2.11 cache folders, and a tree digest of a cache folder.

Run through `make check` (tests/tool/python.sh), which sets MEGACACHE (the tool),
MEGACACHE_LIBRARY (the built library) and MC_SRCDIR."""

import hashlib
import json
import os
import subprocess
import sys
import tarfile

import pytest

SRCDIR = os.environ.get("MC_SRCDIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
TOOL = os.environ.get("MEGACACHE")
DATA = os.path.join(SRCDIR, "tests", "data", "torch-2.11")
KEYS = os.path.join(SRCDIR, "format", "vectors", "keys")
BLOBS = ["mlp-cuda.megacache", "mlp-cuda-precompile.megacache", "mlp-cpu-pgo.megacache"]

if not TOOL or not os.environ.get("MEGACACHE_LIBRARY"):
    pytest.exit("run through make check (MEGACACHE and MEGACACHE_LIBRARY unset)", 2)


def tool(*args, env=None, check=True):
    """Runs the megacache tool; its CompletedProcess (text)."""
    r = subprocess.run([TOOL, *args], capture_output=True, text=True, env=env)
    if check and r.returncode != 0:
        raise AssertionError("megacache %s: exit %d: %s" % (" ".join(args), r.returncode,
                                                            r.stderr))
    return r


def tool_json(*args, env=None):
    return json.loads(tool(*args, "--json", env=env).stdout)


def pymod(*args, env=None):
    """Runs python -m megacache; its CompletedProcess (text)."""
    return subprocess.run([sys.executable, "-m", "megacache", *args], capture_output=True,
                          text=True, env=env)


def tree(root):
    """{relative path: sha256} of the files under root. A Triton group file names its
    children by absolute path; it is compared by the children's names."""
    out = {}
    for dp, _, fns in os.walk(root):
        for fn in fns:
            p = os.path.join(dp, fn)
            with open(p, "rb") as f:
                data = f.read()
            if fn.startswith("__grp__") and fn.endswith(".json"):
                paths = json.loads(data)["child_paths"]
                data = json.dumps(sorted((k, os.path.basename(v)) for k, v in paths.items()))
                data = data.encode()
            out[os.path.relpath(p, root)] = hashlib.sha256(data).hexdigest()
    return out


@pytest.fixture
def keys():
    class K:
        pub = os.path.join(KEYS, "test.pub")
        sec = os.path.join(KEYS, "test.key")
        other_pub = os.path.join(KEYS, "other.pub")
        other_sec = os.path.join(KEYS, "other.key")
    return K


def _extract(tmp_path, name, folder):
    with tarfile.open(os.path.join(DATA, name)) as t:
        t.extractall(tmp_path)
    return str(tmp_path / folder)


@pytest.fixture
def cuda_cache(tmp_path):
    """The real torch cache dir of a CUDA MLP run (with inductor's Triton kernels)."""
    return _extract(tmp_path, "mlp-cuda-cachedir.tar.gz", "cache_mlp_cold")


@pytest.fixture
def env_for(tmp_path):
    """An environment whose torch, Triton and vLLM folders are the given ones (Triton's
    own cache: an empty home unless named; vLLM's: a folder not there unless named)."""
    def make(cache_dir, triton_cache=None, vllm_root=None):
        env = dict(os.environ)
        env["TORCHINDUCTOR_CACHE_DIR"] = cache_dir
        env.pop("TRITON_CACHE_DIR", None)
        env["TRITON_HOME"] = str(tmp_path / "triton-home")
        if triton_cache is not None:
            env["TRITON_CACHE_DIR"] = triton_cache
        env["VLLM_CACHE_ROOT"] = vllm_root or str(tmp_path / "no-vllm")
        env["SOURCE_DATE_EPOCH"] = "1700000000"
        return env
    return make


@pytest.fixture
def bundle(tmp_path, cuda_cache, keys, env_for):
    """A bundle the tool saved from cuda_cache, signed by the test key."""
    b = tmp_path / "b.mcache"
    tool("save", "-o", str(b), "-s", keys.sec, env=env_for(cuda_cache))
    return b


@pytest.fixture
def with_env(monkeypatch, env_for):
    """Sets this process's environment as env_for makes it."""
    def apply(cache_dir, triton_cache=None, vllm_root=None):
        env = env_for(cache_dir, triton_cache, vllm_root)
        for k in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TRITON_HOME",
                  "VLLM_CACHE_ROOT", "SOURCE_DATE_EPOCH"):
            if k in env:
                monkeypatch.setenv(k, env[k])
            else:
                monkeypatch.delenv(k, raising=False)
        return env
    return apply
