"""save, load, verify and list against the tool, on a real torch 2.11 cache dir."""

import os
import pathlib
import re
import shutil

import megacache
from conftest import SRCDIR, tool, tool_json, tree


def test_version_is_the_library_and_configure_version():
    with open(os.path.join(SRCDIR, "configure.ac")) as f:
        ac = re.search(r"AC_INIT\(\[megacache\],\s*\[([^\]]+)\]", f.read()).group(1)
    assert megacache.__version__ == megacache.library_version() == ac


def test_error_names_are_the_header_codes():
    with open(os.path.join(SRCDIR, "lib", "megacache.h")) as f:
        header = dict((int(n), name) for name, n in
                      re.findall(r"\b(MC_ERR_[A-Z_0-9]+) = (-\d+)", f.read()))
    assert megacache._errors.CODES == header


def test_save_gives_the_tool_s_bundle_byte_for_byte(tmp_path, cuda_cache, keys, with_env):
    env = with_env(cuda_cache)
    py, cli = tmp_path / "py.mcache", tmp_path / "cli.mcache"
    r = megacache.save(py, keys.sec, labels={"job": "a"})
    tool("save", "-o", str(cli), "-s", keys.sec, "--label", "job=a", env=env)
    assert py.read_bytes() == cli.read_bytes()
    j = tool_json("list", str(cli))
    assert r.artifacts == len(j["artifacts"]) and r.signatures == 1
    assert [f.tier for f in r.folders] == ["inductor", "triton_home"]
    assert r.folders[0].path == cuda_cache and r.folders[0].exists
    assert r.folders[0].artifacts == r.artifacts and not r.folders[1].exists
    assert r.bytes == sum(a["size"] for a in j["artifacts"])


def test_save_dry_run_writes_nothing(tmp_path, cuda_cache, keys, with_env):
    with_env(cuda_cache)
    r = megacache.save(tmp_path / "x.mcache", keys.sec, dry_run=True)
    assert r.dry_run and r.artifacts > 0 and r.signatures == 0
    assert not (tmp_path / "x.mcache").exists()


def test_save_tells_of_a_misnamed_graph_file(tmp_path, cuda_cache, keys, with_env):
    # torch names a graph file after its content's hash; the save reads each file
    # once, and tells of one that is not, which is left out.
    with_env(cuda_cache)
    graph = sorted(p for p in pathlib.Path(cuda_cache, "fxgraph").rglob("*") if p.is_file())[-1]
    bad = graph.with_name("a" * 51)
    graph.rename(bad)
    told = []
    r = megacache.save(tmp_path / "x.mcache", keys.sec, on_skip=lambda *a: told.append(a))
    rel = str(bad.relative_to(cuda_cache))
    assert told == [(rel, "file name is not the hash of its content")]
    assert r.skipped_files == 1
    j = tool_json("list", str(tmp_path / "x.mcache"))
    assert r.artifacts == len(j["artifacts"])
    # an FX graph artifact's key is torch's key, "/", the entry
    assert "/".join(rel.split("/")[2:]) not in [a["key"] for a in j["artifacts"]]


def test_every_entry_of_a_key_comes_back(tmp_path, cuda_cache, keys, with_env):
    # torch keeps one entry per set of guards under one FX graph or AOTAutograd key and
    # tries each: a second entry under one key of each (another key's real entry, named
    # after its content's hash as torch names each) comes back, every file byte for byte.
    for kind, pattern in (("fxgraph", "*/*"), ("aotautograd", "*")):
        dirs = sorted(p for p in pathlib.Path(cuda_cache, kind).glob(pattern) if p.is_dir())
        entry = next(dirs[1].iterdir())
        shutil.copy(entry, dirs[0] / entry.name)
        assert len(list(dirs[0].iterdir())) == 2
    with_env(cuda_cache)
    b = tmp_path / "b.mcache"
    r = megacache.save(b, keys.sec)
    graph_keys = [a["key"] for a in tool_json("list", str(b))["artifacts"]
                  if a["type"] in ("inductor", "aot_autograd")]
    assert len(graph_keys) == 4 + 1 + 2 + 1 and all(len(k) == 104 for k in graph_keys)
    out = tmp_path / "out"
    megacache.load(b, keys.pub, cache_dir=out)
    assert tree(out) == tree(cuda_cache)
    assert r.artifacts == len(tree(cuda_cache))
