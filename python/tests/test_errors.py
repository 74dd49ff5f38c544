"""Failures raise the right class, with the library's code and message, and write
nothing."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

import megacache
from conftest import SRCDIR, tool


def test_wrong_key_is_a_verification_error_and_installs_nothing(tmp_path, bundle, keys):
    dest = tmp_path / "dest"
    with pytest.raises(megacache.VerificationError) as e:
        megacache.load(bundle, keys.other_pub, cache_dir=dest)
    assert isinstance(e.value, megacache.Error)
    assert (e.value.number, e.value.name) == (-8, "MC_ERR_NO_SIGNATURE")
    assert e.value.code == e.value.status == "untrusted_signature"  # the tool's --json "error"
    assert str(bundle) in e.value.message
    assert "[MC_ERR_NO_SIGNATURE]" in str(e.value)
    assert not dest.exists()


def test_tampered_bundle_is_refused_and_installs_nothing(tmp_path, bundle, keys):
    data = bytearray(bundle.read_bytes())
    data[len(data) // 2] ^= 0x40
    bad = tmp_path / "bad.mcache"
    bad.write_bytes(bytes(data))
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(megacache.VerificationError) as e:
        megacache.load(bad, keys.pub, cache_dir=dest)
    assert e.value.name in ("MC_ERR_INTEGRITY", "MC_ERR_MALFORMED")
    assert str(bad) in e.value.message
    assert os.listdir(dest) == []
    with pytest.raises(megacache.VerificationError):
        megacache.verify(bad, keys.pub)


def test_policy_failures(tmp_path, bundle, keys):
    with pytest.raises(megacache.VerificationError) as e:
        megacache.verify(bundle, keys.pub, min_version=5)
    assert e.value.name == "MC_ERR_ROLLBACK"
    with pytest.raises(megacache.VerificationError) as e:
        megacache.verify(bundle, keys.pub, require={"torch": "2.11"})
    assert e.value.name == "MC_ERR_LABEL" and "torch" in e.value.message
    with pytest.raises(megacache.VerificationError) as e:
        megacache.verify(bundle, [keys.pub, keys.other_pub], threshold=2)
    assert e.value.name == "MC_ERR_THRESHOLD"


def test_usage_errors(tmp_path, bundle, keys):
    missing = tmp_path / "missing.mcache"
    with pytest.raises(megacache.UsageError) as e:
        megacache.load(missing, keys.pub, cache_dir=tmp_path / "d")
    assert e.value.name == "MC_ERR_IO" and str(missing) in e.value.message
    assert not (tmp_path / "d").exists()
    with pytest.raises(megacache.UsageError) as e:
        megacache.load(bundle, [], cache_dir=tmp_path / "d")
    assert "no trusted public key" in e.value.message
    with pytest.raises(megacache.UsageError) as e:
        megacache.load(bundle, "untrusted comment: x\nnot a key\n", cache_dir=tmp_path / "d")
    assert e.value.name == "MC_ERR_KEYFILE" and "public key text" in e.value.message
    with pytest.raises(megacache.UsageError) as e:
        megacache.load(bundle, keys.pub, cache_dir=tmp_path / "d", types="no_such_type")
    assert e.value.name == "MC_ERR_INVALID" and "no_such_type" in e.value.message
    with pytest.raises(megacache.UsageError) as e:
        megacache.torch_artifacts(bundle, keys.pub, torch_format="2.6")
    assert not (tmp_path / "d").exists()


def test_encrypted_key_password(tmp_path, bundle, keys, cuda_cache, with_env):
    kid = megacache.keygen(tmp_path / "e.pub", tmp_path / "e.key", password="s3cret")
    assert len(kid) == 16
    assert (os.stat(tmp_path / "e.key").st_mode & 0o777) == 0o600
    with_env(cuda_cache)
    out = tmp_path / "e.mcache"
    with pytest.raises(megacache.UsageError) as e:
        megacache.save(out, tmp_path / "e.key", password="wrong")
    assert e.value.name == "MC_ERR_PASSWORD"
    assert not out.exists()
    with pytest.raises(megacache.UsageError) as e:
        megacache.save(out, tmp_path / "e.key", password="x" * 2000)
    assert e.value.name == "MC_ERR_PASSWORD" and e.value.message == (
        "%s: the password given is 2000 bytes, over the 1023 a password may have"
        % (tmp_path / "e.key"))
    assert not out.exists()
    megacache.save(out, tmp_path / "e.key", password=lambda prompt: "s3cret")
    assert megacache.verify(out, tmp_path / "e.pub").signatures == [
        megacache.Signature(kid, "verified")]
    with pytest.raises(megacache.UsageError) as e:
        megacache.keygen(tmp_path / "e.pub", tmp_path / "e.key")
    assert e.value.name == "MC_ERR_EXISTS"


def test_exception_in_a_callback_is_raised_after_the_call(tmp_path, bundle, keys):
    def progress(phase, done, total):
        raise KeyError("from the callback")
    with pytest.raises(KeyError, match="from the callback"):
        megacache.verify(bundle, keys.pub, progress=progress)


def _python(code, env):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=env)


def test_missing_library_names_both_places(tmp_path):
    env = dict(os.environ, MEGACACHE_LIBRARY=str(tmp_path / "nowhere" / "libmegacache.so"),
               LD_LIBRARY_PATH="", PYTHONPATH=os.path.join(SRCDIR, "python"))
    r = _python("""
        import ctypes, megacache
        try:
            ctypes.CDLL("libmegacache.so.0")
            installed = True
        except OSError:
            installed = False
        try:
            megacache.load("b.mcache", "k.pub")
        except megacache.LibraryError as e:
            assert not installed, "fell back to nothing though the library is installed"
            assert isinstance(e, megacache.UsageError) and e.number is None
            assert e.code == "failed"
            print(e.message)
        except megacache.UsageError as e:
            assert installed, e
            print("installed library used: " + e.message)
    """, env)
    assert r.returncode == 0, r.stderr
    if not r.stdout.startswith("installed"):
        assert "MEGACACHE_LIBRARY=" + str(tmp_path / "nowhere") in r.stdout
        assert "libmegacache.so.0" in r.stdout


def test_import_needs_no_library(tmp_path):
    env = dict(os.environ, MEGACACHE_LIBRARY=str(tmp_path / "none.so"), LD_LIBRARY_PATH="",
               PYTHONPATH=os.path.join(SRCDIR, "python"))
    r = _python("import megacache; print(megacache.__version__)", env)
    assert r.returncode == 0 and r.stdout.strip() == megacache.__version__


def test_bad_arguments_name_the_parameter(tmp_path, bundle, keys, cuda_cache, with_env):
    for kw, word in (({"threshold": -1}, "threshold"), ({"threshold": 2}, "threshold"),
                     ({"min_version": -1}, "min_version")):
        with pytest.raises(megacache.UsageError, match=word):
            megacache.verify(bundle, keys.pub, **kw)
    # what is wrong, as the tool says it: too few keys for the threshold
    with pytest.raises(megacache.UsageError) as e:
        megacache.verify(bundle, keys.pub, threshold=2)
    assert e.value.message == "threshold=2 needs at least 2 trusted keys; 1 given"
    assert e.value.code == "usage"
    # the same key twice is one key: a threshold of 2 is as impossible as with one
    again = ("threshold=2 needs at least 2 trusted keys; 2 given, 1 distinct (a key given "
             "again, under any key id, counts once)")
    with pytest.raises(megacache.UsageError) as e:
        megacache.verify(bundle, [keys.pub, keys.pub], threshold=2)
    assert e.value.message == again
    # and so is one key under another key id
    alias = os.path.join(os.path.dirname(keys.pub), "test-alias.pub")
    with pytest.raises(megacache.UsageError) as e:
        megacache.verify(bundle, [keys.pub, alias], threshold=2)
    assert e.value.message == again
    with_env(cuda_cache)
    megacache.keygen(tmp_path / "e.pub", tmp_path / "e.key", password="pw")
    out = tmp_path / "x.mcache"
    for kw, word in (({"level": 2 ** 32 + 3}, "level"), ({"expires": 2 ** 64 + 5}, "expires"),
                     ({"bundle_version": -1}, "bundle_version"), ({"labels": {"v": 0}}, "label"),
                     ({"password": 5}, "password")):
        with pytest.raises(megacache.UsageError, match=word):
            megacache.save(out, keys.sec if "password" not in kw else tmp_path / "e.key", **kw)
        assert not out.exists()


def test_every_status_has_its_own_stable_name():
    lib = megacache._ffi.lib()
    names = [lib.mc_status_code(c).decode() for c in sorted(megacache._errors.CODES)]
    assert len(set(names)) == len(names) and "unknown" not in names
    assert all(n.replace("_", "").isalpha() and n.islower() for n in names)
    assert lib.mc_status_code(0) == b"ok" and lib.mc_status_code(-999) == b"unknown"


def test_a_newer_format_asks_for_an_upgrade(tmp_path, keys):
    # Told apart from a broken manifest: a pipeline upgrades for one, distrusts the other.
    fut = os.path.join(SRCDIR, "format", "vectors", "manifest-future-version.mcache")
    with pytest.raises(megacache.UnsupportedVersionError) as e:
        megacache.load(fut, keys.pub, cache_dir=tmp_path / "c")
    assert e.value.status == "unsupported_version" and "upgrade megacache" in e.value.message
    assert isinstance(e.value, megacache.VerificationError)
    assert not (tmp_path / "c").exists()
    r = subprocess.run([sys.executable, "-m", "megacache", "verify", fut, "-p", keys.pub],
                       capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=os.path.join(SRCDIR, "python")))
    assert r.returncode == 3 and "upgrade megacache" in r.stderr, r.stderr
    broken = os.path.join(SRCDIR, "format", "vectors", "manifest-duplicate.mcache")
    with pytest.raises(megacache.VerificationError) as e:
        megacache.verify(broken, keys.pub)
    assert e.value.status == "manifest"


def test_every_library_status_gives_its_code_and_class():
    lib = megacache._ffi.lib()
    for number, name in megacache._errors.CODES.items():
        e = megacache._ffi.status_error(number)
        assert (e.number, e.name) == (number, name)
        assert e.code == lib.mc_status_code(number).decode() != "unknown"
        assert isinstance(e, megacache.VerificationError) == (
            lib.mc_status_is_verification_failure(number) == 1), name


def test_each_error_has_the_code_the_tool_s_json_gives(tmp_path, bundle, keys, env_for):
    """The same failure through the tool (--json) and the package: the tool's "error" is
    the exception's code, and its exit status the exception's class."""
    vectors = os.path.join(SRCDIR, "format", "vectors")
    text = tmp_path / "text.mcache"
    text.write_text("not a bundle\n")
    missing, d = str(tmp_path / "missing.mcache"), str(tmp_path / "d")
    tampered = tmp_path / "tampered.mcache"
    data = bytearray(bundle.read_bytes())
    data[len(data) // 2] ^= 0x40
    tampered.write_bytes(bytes(data))
    env = env_for(str(tmp_path / "none"))
    env["TRITON_CACHE_DIR"] = str(tmp_path / "none2")
    enc_pub, enc_sec, pw = tmp_path / "e.pub", tmp_path / "e.key", tmp_path / "pw"
    megacache.keygen(enc_pub, enc_sec, password="right")
    pw.write_text("wrong\n")
    b = str(bundle)
    cases = [
        (["verify", b, "-p", keys.other_pub], lambda: megacache.verify(b, keys.other_pub)),
        (["verify", b, "-p", keys.pub, "--threshold", "2"],
         lambda: megacache.verify(b, keys.pub, threshold=2)),
        (["verify", b, "-p", keys.pub, "--min-version", "5"],
         lambda: megacache.verify(b, keys.pub, min_version=5)),
        (["verify", b, "-p", keys.pub, "--require", "a=b"],
         lambda: megacache.verify(b, keys.pub, require=["a=b"])),
        (["verify", missing, "-p", keys.pub], lambda: megacache.verify(missing, keys.pub)),
        (["verify", str(text), "-p", keys.pub], lambda: megacache.verify(text, keys.pub)),
        (["verify", str(tampered), "-p", keys.pub],
         lambda: megacache.verify(tampered, keys.pub)),
        (["verify", b, "-p", str(text)], lambda: megacache.verify(b, text)),
        (["verify", os.path.join(vectors, "manifest-future-version.mcache"), "-p", keys.pub],
         lambda: megacache.verify(os.path.join(vectors, "manifest-future-version.mcache"),
                                  keys.pub)),
        (["verify", os.path.join(vectors, "manifest-duplicate.mcache"), "-p", keys.pub],
         lambda: megacache.verify(os.path.join(vectors, "manifest-duplicate.mcache"),
                                  keys.pub)),
        (["load", b, "-p", keys.pub, "--cache-dir", d, "--types", "nope"],
         lambda: megacache.load(b, keys.pub, cache_dir=d, types="nope")),
        (["load", b, "-p", keys.pub, "--cache-dir", d, "--gpu-target", "nope"],
         lambda: megacache.load(b, keys.pub, cache_dir=d, gpu_targets=["nope"])),
        (["load", b, "-p", keys.pub, "--cache-dir", d, "--gpu-target", "hip:gfx942"],
         lambda: megacache.load(b, keys.pub, cache_dir=d, gpu_targets=["hip:gfx942"])),
        (["save", "-o", str(tmp_path / "x.mcache"), "-s", keys.sec],
         lambda: megacache.save(tmp_path / "x.mcache", keys.sec, cache_dir=tmp_path / "none",
                                triton_dir=tmp_path / "none2")),
        (["save", "-o", str(tmp_path / "x.mcache"), "-s", str(enc_sec), "--password-file",
          str(pw), "--cache-dir", os.path.join(vectors)],
         lambda: megacache.save(tmp_path / "x.mcache", enc_sec, password="wrong",
                                cache_dir=vectors)),
        (["keygen", "-p", str(enc_pub), "-s", str(enc_sec), "-W"],
         lambda: megacache.keygen(enc_pub, enc_sec)),
    ]
    exits = {1: megacache.VerificationError, 2: megacache.UsageError,
             3: megacache.UnsupportedVersionError}
    for args, call in cases:
        r = tool(*args, "--json", env=env, check=False)
        j = json.loads(r.stdout)
        with pytest.raises(megacache.Error) as e:
            call()
        assert e.value.code == j["error"], (args, e.value.message, j)
        assert isinstance(e.value, exits[r.returncode]), args
    assert not (tmp_path / "d").exists() and not (tmp_path / "x.mcache").exists()
