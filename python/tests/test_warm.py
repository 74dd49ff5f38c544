"""megacache.warm() around a block: load before, save only what is new after, and never
swallow the block's exception."""

import os
import shutil
import subprocess

import pytest

import megacache
from conftest import tool, tree


@pytest.fixture
def setup(tmp_path, cuda_cache, keys, env_for, with_env):
    """A bundle of the real cache, minus one fxgraph entry (kept aside to add later),
    and an empty cache dir this process uses."""
    fx = os.path.join(cuda_cache, "fxgraph")
    shard = sorted(os.listdir(fx))[0]
    aside = tmp_path / "aside"
    shutil.move(os.path.join(fx, shard), aside)
    b = tmp_path / "b.mcache"
    tool("save", "-o", str(b), "-s", keys.sec, env=env_for(cuda_cache))
    cache = tmp_path / "cache"
    with_env(str(cache))

    class S:
        pass
    s = S()
    s.bundle, s.cache, s.aside, s.shard, s.source = b, cache, aside, shard, cuda_cache
    return s


def test_loads_before_and_saves_nothing_when_nothing_is_new(tmp_path, setup, keys):
    out = tmp_path / "next.mcache"
    with megacache.warm(setup.bundle, keys.pub, save_to=out, secret_key=keys.sec) as w:
        assert tree(setup.cache) == tree(setup.source)
    assert w.loaded[0].installed > 0 and w.saved is None
    assert not out.exists()


def test_the_autograd_remote_setting_is_taken_after_the_block(tmp_path, setup, keys,
                                                              monkeypatch):
    # torch keys AOTAutograd entries by its functorch config's enable_remote_autograd_cache,
    # which the block's own code may set: the label says what it was when the block ended.
    import sys
    import types
    cfg = types.ModuleType("torch._functorch.config")
    cfg.enable_remote_autograd_cache = None
    monkeypatch.setitem(sys.modules, "torch._functorch.config", cfg)
    monkeypatch.delenv("TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE", raising=False)
    out = tmp_path / "next.mcache"
    with megacache.warm(setup.bundle, keys.pub, save_to=out, secret_key=keys.sec):
        cfg.enable_remote_autograd_cache = True
        shutil.copytree(setup.aside, setup.cache / "fxgraph" / setup.shard)
    assert megacache.list_bundle(out).labels[megacache.AOT_REMOTE_LABEL] == "1"


def test_saves_only_what_the_block_added(tmp_path, setup, keys):
    out = tmp_path / "next.mcache"
    with megacache.warm(setup.bundle, keys.pub, save_to=out, secret_key=keys.sec) as w:
        shutil.copytree(setup.aside, setup.cache / "fxgraph" / setup.shard)
    assert w.saved is not None and w.saved.signatures == megacache.list(out).signatures
    assert w.saved.signature_count == 1
    arts = megacache.verify(out, keys.pub).artifacts
    assert [a.type for a in arts] == ["inductor"] and len(arts) == w.saved.artifact_count == 1
    assert [(c.what, c.type, c.key) for c in w.saved.changes] == [
        ("added", "inductor", arts[0].key)]
    assert arts[0].key[1:3] == setup.shard  # fxgraph/<key[1:3]>/<key>/


def test_the_block_s_exception_is_never_swallowed(tmp_path, setup, keys):
    out = tmp_path / "next.mcache"
    with pytest.raises(ValueError, match="training failed"):
        with megacache.warm(setup.bundle, keys.pub, save_to=out, secret_key=keys.sec):
            shutil.copytree(setup.aside, setup.cache / "fxgraph" / setup.shard)
            raise ValueError("training failed")
    # What the block compiled before failing is saved, as `megacache run` saves it.
    assert len(megacache.verify(out, keys.pub).artifacts) == 1


def test_a_failing_save_is_a_note_on_the_block_s_exception(tmp_path, setup, keys):
    out = tmp_path / "no-such-folder" / "next.mcache"
    with pytest.raises(ValueError) as e:
        with megacache.warm(setup.bundle, keys.pub, save_to=out, secret_key=keys.sec) as w:
            shutil.copytree(setup.aside, setup.cache / "fxgraph" / setup.shard)
            raise ValueError("training failed")
    assert "the save after this block failed" in " ".join(getattr(e.value, "__notes__", []))
    assert w.save_error is not None and w.save_error.name == "MC_ERR_IO"


def test_a_failing_save_raises_after_a_clean_block(tmp_path, setup, keys):
    out = tmp_path / "no-such-folder" / "next.mcache"
    with pytest.raises(megacache.UsageError) as e:
        with megacache.warm(setup.bundle, keys.pub, save_to=out, secret_key=keys.sec):
            shutil.copytree(setup.aside, setup.cache / "fxgraph" / setup.shard)
    assert str(out) in e.value.message


def test_a_bad_bundle_stops_before_the_block_unless_allow_cold(tmp_path, setup, keys):
    ran = []
    with pytest.raises(megacache.VerificationError):
        with megacache.warm(setup.bundle, keys.other_pub):
            ran.append(1)
    assert ran == [] and not setup.cache.exists()
    missing = tmp_path / "missing.mcache"
    with megacache.warm([missing, setup.bundle], keys.pub, allow_cold=True) as w:
        ran.append(1)
    assert ran == [1] and [c[0] for c in w.cold] == [str(missing)]
    assert len(w.loaded) == 1


def test_cache_dir_is_this_process_s_for_the_block(tmp_path, setup, keys, monkeypatch):
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    mine = tmp_path / "mine"
    with megacache.warm(setup.bundle, keys.pub, cache_dir=mine) as w:
        assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(mine)
    assert "TORCHINDUCTOR_CACHE_DIR" not in os.environ
    assert w.loaded[0].roots["inductor"] == str(mine) and tree(mine) == tree(setup.source)


def test_the_password_is_asked_before_the_block(tmp_path, setup, keys):
    pub = tmp_path / "e.pub"
    megacache.keygen(pub, tmp_path / "e.key", password="pw")
    events = []

    def password(prompt):
        events.append("password")
        return "pw"
    with megacache.warm(setup.bundle, keys.pub, save_to=tmp_path / "n.mcache",
                        secret_key=tmp_path / "e.key", password=password):
        events.append("block")
        shutil.copytree(setup.aside, setup.cache / "fxgraph" / setup.shard)
    assert events == ["password", "block"]
    assert megacache.verify(tmp_path / "n.mcache", pub).verified
    ran = []
    with pytest.raises(megacache.UsageError) as e:
        with megacache.warm(setup.bundle, keys.pub, save_to=tmp_path / "m.mcache",
                            secret_key=tmp_path / "e.key", password="wrong"):
            ran.append(1)
    assert e.value.name == "MC_ERR_PASSWORD" and ran == []


def test_setup_mistakes_raise_even_with_allow_cold(tmp_path, setup, keys):
    for trusted, kw in ((None, {}), ([], {}), (tmp_path / "no.pub", {}),
                        (keys.pub, {"types": "no_such_type"})):
        with pytest.raises(megacache.UsageError):
            with megacache.warm(setup.bundle, trusted, allow_cold=True, **kw):
                raise AssertionError("the block ran")


def test_a_relative_cache_dir_survives_chdir(tmp_path, setup, keys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    out = tmp_path / "next.mcache"
    with megacache.warm(setup.bundle, keys.pub, save_to=out, secret_key=keys.sec,
                        cache_dir="rel") as w:
        os.chdir("sub")
        shutil.copytree(setup.aside, tmp_path / "rel" / "fxgraph" / setup.shard)
    assert w.saved is not None and w.saved.artifact_count == 1
    assert w.loaded[0].roots["inductor"] == str(tmp_path / "rel")


def test_repr_says_what_the_block_loaded_and_saved_and_where(tmp_path, setup, keys):
    out, missing = tmp_path / "next.mcache", tmp_path / "missing.mcache"
    with megacache.warm([setup.bundle, missing], keys.pub, save_to=out, secret_key=keys.sec,
                        allow_cold=True) as w:
        during = repr(w)
        shutil.copytree(setup.aside, setup.cache / "fxgraph" / setup.shard)
    n = w.loaded[0].installed
    assert n > 100 and w.roots == w.loaded[0].roots
    head = "<megacache.Warm loaded %r: %d installed, 0 replaced, 0 unchanged; cold %r: %s; " % (
        str(setup.bundle), n, str(missing), w.cold[0][1])
    roots = "roots inductor=%r, triton=%r, triton_home=%r, vllm=%r>" % (
        str(setup.cache), str(setup.cache / "triton"),
        str(tmp_path / "triton-home" / ".triton" / "cache"), str(tmp_path / "no-vllm"))
    assert "cannot open" in w.cold[0][1]
    assert during == head + "saves new artifacts to %r after the block; " % str(out) + roots
    # the block read nothing: said plainly; two bundles given, so none is named
    used = ("the block read 0 of %d loaded artifacts (aot_autograd 0 of 2, autotune 0 of 4, "
            "inductor 0 of 3, kernel_code 0 of 16, triton 0 of 128); 1 new; read none of the "
            "loaded aot_autograd (2), autotune (4), inductor (3), kernel_code (16), triton (128) "
            "artifacts; the likely cause is a torch, Triton or config mismatch: compare the "
            "bundle's labels (megacache list BUNDLE) with this host's; " % n)
    assert repr(w) == head + used + "saved %r: 1 artifact (1 added, 0 changed); " % str(
        out) + roots


def test_repr_says_when_nothing_was_saved(tmp_path, setup, keys):
    out = tmp_path / "next.mcache"
    with megacache.warm(setup.bundle, keys.pub, save_to=out, secret_key=keys.sec) as w:
        pass
    assert "; nothing new, %r not written; roots inductor=" % str(out) in repr(w)
    with megacache.warm(None, None) as w:
        pass
    assert repr(w).startswith("<megacache.Warm no bundle loaded; no save_to; roots inductor=")


def _read(paths):
    for p in paths:
        with open(p, "rb") as f:
            f.read()


def test_used_tells_what_the_block_read_and_wrote(tmp_path, setup, keys):
    # The block reads the FX graph entries and one Triton kernel's files, only stats the
    # generated code, and writes an FX graph entry and a kernel_code file anew.
    with megacache.warm(setup.bundle, keys.pub) as w:
        assert w.used == {} and "the block" not in repr(w)
        c = setup.cache
        kernel = sorted((c / "triton" / "0").iterdir())[0]
        _read([*c.glob("fxgraph/*/*/*"), *kernel.iterdir()])
        for p in c.glob("*/*.py"):
            os.stat(p)
        shutil.copytree(setup.aside, c / "fxgraph" / setup.shard)
        (c / "zz").mkdir()
        (c / "zz" / "cjobnew.py").write_text("print(1)")
    assert w.used == {
        "aot_autograd": megacache.Used(installed=2, read=0, new=0, not_seen=0),
        "autotune": megacache.Used(installed=4, read=0, new=0, not_seen=0),
        "inductor": megacache.Used(installed=3, read=3, new=1, not_seen=0),
        "kernel_code": megacache.Used(installed=16, read=0, new=1, not_seen=0),
        "triton": megacache.Used(installed=128, read=8, new=0, not_seen=0)}
    assert w.used_not_seen == {} and w.used_error is None
    assert ("; the block read 11 of 153 loaded artifacts (aot_autograd 0 of 2, autotune 0 of "
            "4, inductor 3 of 3, kernel_code 0 of 16, triton 8 of 128); 2 new; read none of "
            "the loaded aot_autograd (2) artifacts; the likely "
            "cause is a torch, Triton or config mismatch: compare the bundle's labels "
            "(megacache list %s) with this host's; no save_to; " % setup.bundle) in repr(w)


def test_used_is_told_when_the_block_raises_and_before_the_save(tmp_path, setup, keys):
    # The save reads loaded files to compare them with the bundle: what the block used is
    # taken before it, and after a block that raised too.
    out = tmp_path / "next.mcache"
    with pytest.raises(ValueError):
        with megacache.warm(setup.bundle, keys.pub, save_to=out, secret_key=keys.sec) as w:
            _read(setup.cache.glob("aotautograd/*/*"))
            shutil.copytree(setup.aside, setup.cache / "fxgraph" / setup.shard)
            raise ValueError("training failed")
    assert w.saved is not None and w.saved.artifact_count == 1
    assert w.used["aot_autograd"] == megacache.Used(installed=2, read=2, new=0, not_seen=0)
    assert w.used["inductor"] == megacache.Used(installed=3, read=0, new=1, not_seen=0)
    assert sum(u.read for u in w.used.values()) == 2


def test_save_used_keeps_what_the_block_read_and_wrote_with_their_units(tmp_path, setup, keys):
    # The block reads one FX graph entry and one file of one Triton kernel, and writes a
    # kernel_code file: the bundle holds those, the kernel's whole folder and the kernel
    # code the entry names, and nothing else.
    used = tmp_path / "used.mcache"
    c = setup.cache
    with megacache.warm(setup.bundle, keys.pub, save_used=used, secret_key=keys.sec) as w:
        entry = sorted(c.glob("fxgraph/*/*/*"))[0]
        kernel = sorted((c / "triton" / "0").iterdir())[0]
        _read([entry, sorted(kernel.iterdir())[0]])
        (c / "zz").mkdir()
        (c / "zz" / "cjobnew.py").write_text("print(1)")
    names = set()
    for p in c.glob("*/c*.py"):
        if p.stem.encode() in entry.read_bytes():
            names.add(("kernel_code", "%s/%s" % (p.parent.name, p.name)))
    assert len(names) >= 1
    info = megacache.list_bundle(used, keys.pub)
    got = {(a.type, a.key) for a in info.artifacts}
    want = ({("inductor", "%s/%s" % (entry.parent.name, entry.name)),
             ("kernel_code", "zz/cjobnew.py")} | names |
            {("triton", "0/%s/%s" % (kernel.name, f.name)) for f in kernel.iterdir()})
    assert got == want
    assert info.labels["megacache.contents"] == "used"
    assert w.saved_used is not None and w.saved_used.artifact_count == len(want)
    assert w.used_left_out == 154 - len(want) and w.used_kept_unseen == 0
    assert w.save_used_error is None
    assert ("saved what it used to %r: %d artifacts, %d in the caches left out"
            % (str(used), len(want), 154 - len(want))) in repr(w)


def test_save_used_writes_nothing_when_the_block_used_nothing(tmp_path, setup, keys):
    used = tmp_path / "used.mcache"
    with megacache.warm(setup.bundle, keys.pub, save_used=used, secret_key=keys.sec) as w:
        pass
    assert w.saved_used is None and not used.exists()
    assert "used nothing, %r not written" % str(used) in repr(w)


def test_save_used_refuses_files_whose_reads_cannot_be_seen(tmp_path, setup, keys):
    # On a noatime mount no read is seen: nothing is written and NotSeenError says why;
    # save_used_keep_unseen=True keeps those files. Mounting needs root.
    mnt = tmp_path / "na"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.call(
            ["mount", "-t", "tmpfs", "-o", "noatime,size=64m", "tmpfs", str(mnt)],
            stderr=subprocess.DEVNULL) != 0:
        pytest.skip("a noatime tmpfs cannot be mounted here")
    try:
        used = tmp_path / "used.mcache"
        with pytest.raises(megacache.NotSeenError) as e:
            with megacache.warm(setup.bundle, keys.pub, save_used=used, secret_key=keys.sec,
                                cache_dir=mnt / "c"):
                _read(sorted((mnt / "c").glob("fxgraph/*/*/*"))[:1])
        assert (e.value.code, e.value.name) == ("not_seen", "MC_ERR_NOT_SEEN")
        assert "could not be seen (153 on a noatime mount)" in str(e.value)
        assert not used.exists()
        with megacache.warm(setup.bundle, keys.pub, save_used=used, secret_key=keys.sec,
                            cache_dir=mnt / "c2", save_used_keep_unseen=True) as w:
            pass
        assert w.saved_used is not None and w.saved_used.artifact_count == 153
        assert w.used_kept_unseen == 153 and w.used_left_out == 0
    finally:
        subprocess.call(["umount", str(mnt)])


def test_save_used_is_not_written_after_a_block_that_raised(tmp_path, setup, keys):
    # A job that failed used part of what the whole job needs: nothing is saved.
    used = tmp_path / "used.mcache"
    with pytest.raises(ValueError):
        with megacache.warm(setup.bundle, keys.pub, save_used=used, secret_key=keys.sec) as w:
            _read(sorted(setup.cache.glob("fxgraph/*/*/*"))[:1])
            raise ValueError("training failed")
    assert w.saved_used is None and w.save_used_error is None and not used.exists()
    assert "the block raised, %r not written" % str(used) in repr(w)
