"""save, load, verify and list against the tool, on a real torch 2.11 cache dir."""

import dataclasses
import os
import pathlib
import re
import shutil

import pytest

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
    assert r.artifact_count == len(j["artifacts"])
    # the signatures in one shape, whoever reads them: as list() gives them
    assert r.signatures == megacache.list(py).signatures and r.signature_count == 1
    assert [dataclasses.asdict(x) for x in r.signatures] == j["signatures"]
    assert [f.tier for f in r.folders] == ["inductor", "triton_home", "vllm"]
    assert r.folders[0].path == cuda_cache and r.folders[0].exists
    assert r.folders[0].artifact_count == r.artifact_count and not r.folders[1].exists
    assert r.folders[2] == megacache.Folder("vllm", env["VLLM_CACHE_ROOT"], False, 0)
    assert r.bytes == sum(a["size"] for a in j["artifacts"])


def test_save_dry_run_writes_nothing(tmp_path, cuda_cache, keys, with_env):
    with_env(cuda_cache)
    r = megacache.save(tmp_path / "x.mcache", keys.sec, dry_run=True)
    assert r.dry_run and r.artifact_count > 0 and r.signatures == [] and r.signature_count == 0
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
    assert r.artifact_count == len(j["artifacts"])
    # an FX graph artifact's key is torch's key, "/", the entry
    assert "/".join(rel.split("/")[2:]) not in [a["key"] for a in j["artifacts"]]


def test_every_entry_of_a_key_comes_back(tmp_path, cuda_cache, keys, with_env, monkeypatch):
    # torch keeps one entry per set of guards under one FX graph or AOTAutograd key and
    # tries each: a second entry under one key of each (another key's real entry, named
    # after its content's hash as torch names each) comes back, every file byte for byte.
    for kind, pattern in (("fxgraph", "*/*"), ("aotautograd", "*")):
        dirs = sorted(p for p in pathlib.Path(cuda_cache, kind).glob(pattern) if p.is_dir())
        entry = next(dirs[1].iterdir())
        shutil.copy(entry, dirs[0] / entry.name)
        assert len(list(dirs[0].iterdir())) == 2
    with_env(cuda_cache)
    monkeypatch.delenv("TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE", raising=False)
    b = tmp_path / "b.mcache"
    r = megacache.save(b, keys.sec)
    info = megacache.list_bundle(b)
    assert info.labels[megacache.AOT_REMOTE_LABEL] == "unset"
    graph_keys = [a["key"] for a in tool_json("list", str(b))["artifacts"]
                  if a["type"] in ("inductor", "aot_autograd")]
    assert len(graph_keys) == 4 + 1 + 2 + 1 and all(len(k) == 104 for k in graph_keys)
    out = tmp_path / "out"
    megacache.load(b, keys.pub, cache_dir=out)
    assert tree(out) == tree(cuda_cache)
    assert r.artifact_count == len(tree(cuda_cache))


def test_save_records_the_autograd_remote_setting(tmp_path, cuda_cache, keys, with_env,
                                                  monkeypatch):
    # torch keys AOTAutograd entries by it; `megacache push` reads it back
    with_env(cuda_cache)
    monkeypatch.setenv("TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE", "1")
    megacache.save(tmp_path / "on.mcache", keys.sec)
    assert megacache.list_bundle(tmp_path / "on.mcache").labels[megacache.AOT_REMOTE_LABEL] == "1"
    megacache.save(tmp_path / "given.mcache", keys.sec,
                   labels={megacache.AOT_REMOTE_LABEL: "0"})
    assert megacache.list_bundle(tmp_path / "given.mcache").labels[
        megacache.AOT_REMOTE_LABEL] == "0"


def test_save_of_nothing_names_the_folders(tmp_path, keys, with_env):
    with_env(str(tmp_path / "none"))
    try:
        megacache.save(tmp_path / "x.mcache", keys.sec)
    except megacache.UsageError as e:
        assert e.code == "no_artifacts" and e.number is None
        assert "nothing to save" in e.message and str(tmp_path / "none") in e.message
        assert "triton-home" in e.message
        assert e.message.endswith(" or %s (not there)" % (tmp_path / "no-vllm"))
    else:
        raise AssertionError("no error")
    assert not (tmp_path / "x.mcache").exists()


def test_load_installs_the_tool_s_tree(tmp_path, bundle, cuda_cache, keys):
    b = bundle
    cli_dir, py_dir = tmp_path / "cli", tmp_path / "py"
    j = tool_json("load", str(b), "-p", keys.pub, "--cache-dir", str(cli_dir),
                  "--triton-dir", str(tmp_path / "cli-triton"))
    r = megacache.load(b, keys.pub, cache_dir=py_dir, triton_dir=tmp_path / "py-triton")
    assert tree(py_dir) == tree(cli_dir) and len(tree(py_dir)) > 0
    source = tree(cuda_cache)
    assert all(source[p] == h for p, h in tree(py_dir).items())
    assert (r.installed, r.unchanged, r.would_install, r.bytes) == (
        j["installed"], j["unchanged"], j["would_install"], j["bytes"])
    assert r.roots["inductor"] == str(py_dir)
    assert sorted((a.type, a.key, a.dest) for a in r.artifacts) == sorted(
        (a["type"], a["key"], a["dest"].replace(str(cli_dir), str(py_dir)))
        for a in j["artifacts"])
    for a in r.artifacts:
        assert a.action == "installed" and os.path.isfile(a.dest)
    again = megacache.load(b, [keys.other_pub, keys.pub], cache_dir=py_dir,
                           triton_dir=tmp_path / "py-triton")
    assert again.installed == 0 and again.unchanged == r.installed


def test_load_dry_run_and_types(tmp_path, bundle, cuda_cache, keys):
    b = bundle
    d = tmp_path / "d"
    r = megacache.load(b, keys.pub, cache_dir=d, dry_run=True)
    assert r.would_install > 0 and r.installed == 0 and not d.exists()
    assert all(a.action == "would_install" for a in r.artifacts)
    r = megacache.load(b, keys.pub, cache_dir=d, types="autotune")
    assert r.installed > 0 and {a.type for a in r.artifacts} == {"autotune"}
    assert all(p.endswith(".best_config") for p in tree(d))


def test_list_and_verify_match_the_tool(tmp_path, bundle, cuda_cache, keys):
    b = bundle
    j = tool_json("list", str(b))
    info = megacache.list(b)
    assert not info.verified and info.bundle == str(b)
    assert [a.__dict__ for a in info.artifacts] == j["artifacts"]
    assert [x.key_id for x in info.signatures] == j["signers"] and info.labels == j["labels"]
    assert [dataclasses.asdict(x) for x in info.signatures] == j["signatures"]
    assert all(x.state == "not_checked" for x in info.signatures)
    assert info.created == j["created"] == 1700000000
    v = megacache.verify(os.fsencode(b), pathlib.Path(keys.pub))
    assert v.verified and v.artifacts == info.artifacts
    v = megacache.verify(b, keys.pub, signatures_only=True)
    assert v.verified


def _key_id(pub):
    return pathlib.Path(pub).read_text().splitlines()[0].split()[-1]


def test_signature_states(tmp_path, bundle, keys):
    """A signature is verified, not checked (its key not trusted) or broken, as the
    tool says; verified=True vouches only through the verified ones."""
    ci, other = _key_id(keys.pub), _key_id(keys.other_pub)
    two = tmp_path / "two.mcache"
    tool("sign", str(bundle), "-s", keys.other_sec, "-p", keys.pub, "-o", str(two))
    v = megacache.verify(two, keys.other_pub)
    assert v.verified
    assert sorted(v.signatures, key=str) == sorted(
        [megacache.Signature(ci, "not_checked"), megacache.Signature(other, "verified")], key=str)
    # the CI key's signature broken by one byte of the manifest, then signed unchecked
    d = bytearray(bundle.read_bytes())
    i = d.index(b'"created":')
    d[i + 11] = ord("9") if d[i + 11] != ord("9") else ord("8")
    changed, broken = tmp_path / "changed.mcache", tmp_path / "broken.mcache"
    changed.write_bytes(bytes(d))
    tool("sign", str(changed), "-s", keys.other_sec, "--insecure-no-verify", "-o", str(broken))
    with pytest.raises(megacache.VerificationError) as e:
        megacache.verify(broken, [keys.pub, keys.other_pub])
    assert e.value.name == "MC_ERR_BAD_SIGNATURE" and ci in e.value.message
    info = megacache.list(broken, [keys.pub, keys.other_pub])
    assert not info.verified
    assert {x.key_id: x.state for x in info.signatures} == {ci: "broken", other: "verified"}
    assert {x.key_id: x.state for x in megacache.list(broken).signatures} == {
        ci: "not_checked", other: "not_checked"}
    j = tool_json("list", str(broken), "-p", keys.pub, "-p", keys.other_pub)
    assert sorted(j["signatures"], key=str) == sorted(
        [dataclasses.asdict(x) for x in info.signatures], key=str)


def test_keys_as_text(tmp_path, cuda_cache, keys, with_env):
    b = tmp_path / "t.mcache"
    with_env(cuda_cache)
    pub_text = pathlib.Path(keys.pub).read_text()
    megacache.save(b, pathlib.Path(keys.sec).read_bytes())
    megacache.save(tmp_path / "p.mcache", keys.sec)
    assert b.read_bytes() == (tmp_path / "p.mcache").read_bytes()
    base64_line = pub_text.splitlines()[1]
    for k in (pub_text, pub_text.encode(), base64_line, pathlib.Path(keys.pub)):
        assert megacache.verify(b, k).verified


def test_progress_reaches_the_callback(tmp_path, bundle, cuda_cache, keys):
    b = bundle
    seen = []
    megacache.load(b, keys.pub, cache_dir=tmp_path / "p",
                   progress=lambda phase, done, total: seen.append((phase, done, total)))
    assert seen and all(0 <= d <= t for _, d, t in seen)
    last = [s for s in seen if s[0] == seen[-1][0]][-1]
    assert last[1] == last[2] > 0


def test_load_tells_replaced_from_installed_and_unchanged(tmp_path, bundle, keys):
    d = tmp_path / "d"
    full = megacache.load(bundle, keys.pub, cache_dir=d, triton_dir=tmp_path / "t")
    files = sorted(full.artifacts, key=lambda a: a.dest)
    stale, same = files[0], files[1]
    for a in files[2:]:
        os.remove(a.dest)
    with open(stale.dest, "wb") as f:
        f.write(b"stale")
    dry = megacache.load(bundle, keys.pub, cache_dir=d, triton_dir=tmp_path / "t", dry_run=True)
    acts = {a.dest: a.action for a in dry.artifacts}
    assert acts[stale.dest] == "would_replace" and acts[same.dest] == "unchanged"
    assert (dry.would_install, dry.would_replace, dry.unchanged) == (len(files) - 2, 1, 1)
    assert pathlib.Path(stale.dest).read_bytes() == b"stale"
    j = tool_json("load", str(bundle), "-p", keys.pub, "--cache-dir", str(d),
                  "--triton-dir", str(tmp_path / "t"), "--dry-run")
    assert (j["would_install"], j["would_replace"], j["unchanged"]) == (len(files) - 2, 1, 1)
    r = megacache.load(bundle, keys.pub, cache_dir=d, triton_dir=tmp_path / "t")
    acts = {a.dest: a.action for a in r.artifacts}
    assert acts[stale.dest] == "replaced" and acts[same.dest] == "unchanged"
    assert (r.installed, r.replaced, r.unchanged) == (len(files) - 2, 1, 1)
    assert r.bytes == sum(a.size for a in files) - same.size
    assert pathlib.Path(stale.dest).stat().st_size == stale.size
    listed = {(a["type"], a["key"]): a["executable"] for a in tool_json("list", str(bundle))["artifacts"]}
    assert {(a.type, a.key): a.executable for a in r.artifacts} == listed
