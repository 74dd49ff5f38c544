"""vLLM's compile cache through the package: save(vllm_dir=) records it as the tool's
save --vllm-dir does, load(vllm_dir=) installs it byte for byte, warm(vllm_dir=) points
$VLLM_CACHE_ROOT at it for the block, and $VLLM_CACHE_ROOT is honoured when no folder is
given."""

import ast
import base64
import os
import shutil
import struct
import zlib

import pytest

import megacache
from conftest import tool, tool_json, tree

HASH = "a06ab0848f"
PREFIX = "torch_compile_cache/%s/rank_0_0/backbone" % HASH
ART = "artifact_compile_range_8_8_subgraph_0"
HANDLES = PREFIX + "/vllm_compile_cache.py"
AOT = "torch_compile_cache/torch_aot_compile/%064x/rank_0_0/model" % 0xfeed
UNKNOWN = "modelinfo/x.json"
TYPES = {"vllm_meta", "vllm_handles", "vllm_artifact", "vllm_aot"}


def _field(b):
    return struct.pack(">Q", len(b)) + b


def _put(root, rel, data):
    p = os.path.join(root, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def _vllm_tree(root):
    """A vLLM cache root as vLLM writes it, at root (absolute): one rank's notes, its
    binary artifact and the handle file that names it by absolute path (as vLLM's pprint
    writes it), an ahead-of-time compile, and a file of no vLLM shape."""
    root = str(root)
    _put(root, PREFIX + "/cache_key_factors.json",
         '{\n  "code_hash": "c0de",\n  "config_hash": "c0f1"\n}')
    _put(root, PREFIX + "/computation_graph.py",
         "from __future__ import annotations\nimport torch\n")
    body = (_field(b"CacheCompiledArtifact") + _field(bytes(range(32))) +
            _field(base64.b64encode(b"a" + b"q" * 51)) + _field(b"\0\1payload" * 40))
    _put(root, PREFIX + "/" + ART, struct.pack(">I", zlib.crc32(body)) + body)
    _put(root, HANDLES, "{((8, 8), 0, 'inductor_standalone'): ('%s', '%s/%s/%s')}"
         % (ART, root, PREFIX, ART))
    _put(root, AOT, b"\x80\x04\x95opaque pickle 0")
    _put(root, UNKNOWN, "{}")
    return root


def _vllm_only(d):
    """tree(d) without the handle file (its path may be rewritten for where it lands) and
    the file of no vLLM shape."""
    return {p: h for p, h in tree(d).items() if p not in (HANDLES, UNKNOWN)}


@pytest.fixture
def src(tmp_path, with_env):
    """A vLLM root, and an environment whose torch and Triton folders are not there."""
    with_env(str(tmp_path / "no-torch"))
    return _vllm_tree(tmp_path / "src")


@pytest.fixture
def vbundle(tmp_path, src, keys):
    b = tmp_path / "v.mcache"
    megacache.save(b, keys.sec, vllm_dir=src)
    return b


def test_save_records_vllm_dir_as_the_tool_does(tmp_path, src, keys, env_for):
    py, cli = tmp_path / "py.mcache", tmp_path / "cli.mcache"
    skipped = []
    r = megacache.save(py, keys.sec, vllm_dir=src, on_skip=lambda *a: skipped.append(a))
    env = env_for(str(tmp_path / "no-torch"))
    tool("save", "-o", str(cli), "-s", keys.sec, "--vllm-dir", src, env=env)
    assert py.read_bytes() == cli.read_bytes()
    arts = megacache.list(py).artifacts
    assert {a.type for a in arts} == TYPES and len(arts) == r.artifact_count == 5
    assert sorted(a.key for a in arts) == sorted(set(tree(src)) - {UNKNOWN})
    assert r.folders[2] == megacache.Folder("vllm", src, True, 5)
    assert [(f.tier, f.exists) for f in r.folders[:2]] == [("inductor", False),
                                                          ("triton_home", False)]
    assert skipped == [(UNKNOWN, "not a known vLLM cache file")] and r.skipped_files == 1
    # the report's folders are the tool's
    j = tool_json("save", "--dry-run", "-o", str(tmp_path / "d.mcache"), "--vllm-dir", src,
                  env=env)
    assert [(f.tier, f.path, f.exists, f.artifact_count) for f in r.folders] == [
        (f["tier"], f["path"], f["exists"], f["artifact_count"]) for f in j["folders"]]


def test_save_reads_vllm_cache_root_when_no_folder_is_given(tmp_path, keys, with_env,
                                                             monkeypatch):
    root = _vllm_tree(tmp_path / "env-root")
    with_env(str(tmp_path / "no-torch"), vllm_root=root)
    r = megacache.save(tmp_path / "x.mcache", keys.sec)
    assert r.folders[2] == megacache.Folder("vllm", root, True, 5) and r.artifact_count == 5
    # then $XDG_CACHE_HOME/vllm, then ~/.cache/vllm, as vLLM resolves its root
    monkeypatch.delenv("VLLM_CACHE_ROOT")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    xdg = _vllm_tree(tmp_path / "xdg" / "vllm")
    assert megacache.save(tmp_path / "x.mcache", None, dry_run=True).folders[2] == (
        megacache.Folder("vllm", xdg, True, 5))
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    with pytest.raises(megacache.UsageError) as e:
        megacache.save(tmp_path / "y.mcache", keys.sec)
    assert e.value.code == "no_artifacts"
    assert e.value.message.endswith(" or %s (not there)" % (tmp_path / "home/.cache/vllm"))
    assert not (tmp_path / "y.mcache").exists()


def test_load_vllm_dir_installs_the_tree_byte_for_byte(tmp_path, src, vbundle, keys):
    dst = tmp_path / "dst"
    r = megacache.load(vbundle, keys.pub, vllm_dir=dst)
    assert _vllm_only(dst) == _vllm_only(src) and len(_vllm_only(dst)) == 4
    assert os.path.isfile(dst / HANDLES) and not (dst / UNKNOWN).exists()
    # the handle names the artifact where it landed, not where it was saved from
    (handle,) = ast.literal_eval((dst / HANDLES).read_text()).values()
    assert handle[1] == str(dst / PREFIX / handle[0]) and os.path.isfile(handle[1])
    assert r.installed == 5 and r.roots["vllm"] == str(dst)
    assert sorted((a.type, a.dest) for a in r.artifacts) == sorted(
        (a.type, str(dst / a.key)) for a in megacache.list(vbundle).artifacts)
    # nothing went to the folders torch and Triton use here
    assert not (tmp_path / "no-torch").exists() and not (tmp_path / "no-vllm").exists()
    again = megacache.load(vbundle, keys.pub, vllm_dir=dst, types="vllm_meta")
    assert (again.installed, again.unchanged) == (0, 2)


def test_load_at_the_root_saved_from_gives_every_byte_back(tmp_path, src, vbundle, keys):
    want = tree(src)
    shutil.rmtree(src)
    megacache.load(vbundle, keys.pub, vllm_dir=src)
    want.pop(UNKNOWN)
    assert tree(src) == want


def test_load_honours_vllm_cache_root(tmp_path, vbundle, keys, with_env, src):
    root = tmp_path / "env-root"
    with_env(str(tmp_path / "no-torch"), vllm_root=str(root))
    r = megacache.load(vbundle, keys.pub)
    assert r.roots["vllm"] == str(root) and _vllm_only(root) == _vllm_only(src)


def test_warm_sets_vllm_cache_root_for_the_block(tmp_path, src, vbundle, keys,
                                                 monkeypatch):
    # loaded back where it was saved from (given relative), the handle file's path holds
    monkeypatch.chdir(tmp_path)
    out, mine, want = tmp_path / "next.mcache", src, tree(src)
    shutil.rmtree(src)
    monkeypatch.setenv("VLLM_CACHE_ROOT", "/before")
    new = PREFIX.replace("rank_0_0", "rank_1_0") + "/computation_graph.py"
    with megacache.warm(vbundle, keys.pub, save_to=out, secret_key=keys.sec,
                        vllm_dir="src") as w:
        assert os.environ["VLLM_CACHE_ROOT"] == mine
        want.pop(UNKNOWN)
        assert tree(mine) == want
        _put(mine, new, "import torch\n")
    assert os.environ["VLLM_CACHE_ROOT"] == "/before"
    assert w.roots["vllm"] == w.loaded[0].roots["vllm"] == mine
    assert w.loaded[0].installed == 5
    assert [(c.what, c.type, c.key) for c in w.saved.changes] == [("added", "vllm_meta", new)]
    assert [(a.type, a.key) for a in megacache.verify(out, keys.pub).artifacts] == [
        ("vllm_meta", new)]
    assert w.saved.folders[2] == megacache.Folder("vllm", mine, True, 6)
    # unset before, unset after
    monkeypatch.delenv("VLLM_CACHE_ROOT")
    with megacache.warm(None, None, vllm_dir=mine):
        assert os.environ["VLLM_CACHE_ROOT"] == mine
    assert "VLLM_CACHE_ROOT" not in os.environ


def test_warm_honours_vllm_cache_root(tmp_path, vbundle, keys, with_env, src):
    root = str(tmp_path / "env-root")
    with_env(str(tmp_path / "no-torch"), vllm_root=root)
    with megacache.warm(vbundle, keys.pub) as w:
        assert os.environ["VLLM_CACHE_ROOT"] == root
        assert _vllm_only(root) == _vllm_only(src)
    assert os.environ["VLLM_CACHE_ROOT"] == root
    assert w.roots["vllm"] == root and w.loaded[0].installed == 5
