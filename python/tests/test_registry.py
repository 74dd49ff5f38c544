"""Bundles in an OCI registry through the package: save() pushes to an oci:// reference,
load(), verify() and warm() read from one, copy() moves the bytes between files and
registries, and the digests reported are the registry's own. Against a real registry:
Debian's docker-registry, plain HTTP, anonymous, on 127.0.0.1."""

import contextlib
import hashlib
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

import megacache
from conftest import tool, tree

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
SECRET = "pa55-never-shown"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url, accept=None):
    """(body, headers) of a GET."""
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.read(), r.headers


class Registry:
    """A docker-registry serving on 127.0.0.1:port with its blobs under root."""

    def __init__(self, host, root):
        self.host, self.root = host, root

    def ref(self, repo_tag):
        return "oci://%s/%s" % (self.host, repo_tag)

    def manifest(self, repo, tag):
        """The manifest's bytes as the registry serves them, and its Docker-Content-Digest."""
        body, headers = _get("http://%s/v2/%s/manifests/%s" % (self.host, repo, tag),
                             OCI_MANIFEST)
        return body, headers["Docker-Content-Digest"]

    def blob(self, repo, digest):
        return _get("http://%s/v2/%s/blobs/%s" % (self.host, repo, digest))[0]

    def blob_file(self, digest):
        """Where the registry keeps a blob on disk."""
        hexd = digest.split(":", 1)[1]
        return os.path.join(self.root, "docker", "registry", "v2", "blobs", "sha256", hexd[:2],
                            hexd, "data")


@contextlib.contextmanager
def _serve(tmp_path, name, auth=""):
    """A docker-registry of its own under tmp_path/name, killed after; auth: the lines of
    its config's auth section."""
    exe = shutil.which("docker-registry")
    if exe is None:
        pytest.skip("docker-registry is not installed (Debian's docker-registry package): "
                    "no registry to push to")
    port, root = _free_port(), tmp_path / name
    config = tmp_path / (name + ".yml")
    config.write_text("version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\n"
                      "storage:\n  filesystem:\n    rootdirectory: %s\n"
                      "http:\n  addr: 127.0.0.1:%d\n%s" % (root, port, auth))
    log = open(tmp_path / (name + ".log"), "wb")
    proc = subprocess.Popen([exe, "serve", str(config)], stdout=log, stderr=log)
    try:
        for _ in range(200):
            if proc.poll() is not None:
                raise AssertionError("docker-registry exited %d: %s" % (
                    proc.returncode, (tmp_path / (name + ".log")).read_text()))
            try:
                _get("http://127.0.0.1:%d/v2/" % port)
                break
            except urllib.error.HTTPError:
                break  # it answers: 401 where a login is needed
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.05)
        else:
            raise AssertionError("docker-registry did not answer on port %d" % port)
        yield Registry("127.0.0.1:%d" % port, str(root))
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture
def registry(tmp_path):
    """An anonymous registry of its own for the test."""
    with _serve(tmp_path, "registry") as r:
        yield r


@pytest.fixture
def login_registry(tmp_path, monkeypatch):
    """A registry whose one user is "ci" with the password SECRET (Basic auth), and no
    credentials in this process's environment or auth files."""
    if shutil.which("htpasswd") is None:
        pytest.skip("htpasswd is not installed (Debian's apache2-utils): no login to test")
    users = tmp_path / "htpasswd"
    users.write_bytes(subprocess.run(["htpasswd", "-Bbn", "ci", SECRET], check=True,
                                     capture_output=True).stdout)
    for var in ("MEGACACHE_REGISTRY_USER", "MEGACACHE_REGISTRY_PASSWORD",
                "REGISTRY_AUTH_FILE", "XDG_RUNTIME_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    auth = "auth:\n  htpasswd:\n    realm: megacache-test\n    path: %s\n" % users
    with _serve(tmp_path, "login", auth) as r:
        yield r


@pytest.fixture
def pushed(registry, tmp_path, cuda_cache, keys, with_env, monkeypatch):
    """The real cache saved by the package to oci://HOST/megacache/job:v1 (and, the same
    bytes, to a file), from a working folder left otherwise empty."""
    with_env(cuda_cache)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    ref = registry.ref("megacache/job:v1")
    r = megacache.save(ref, keys.sec, labels={"job": "a"})
    file = tmp_path / "job.mcache"
    megacache.save(file, keys.sec, labels={"job": "a"})

    class P:
        pass
    p = P()
    p.ref, p.report, p.file, p.source, p.work = ref, r, file, cuda_cache, work
    return p


def test_save_pushes_the_bundle_and_returns_the_registry_s_digests(tmp_path, registry, pushed):
    r = pushed.report
    assert r.bundle == pushed.ref and r.artifact_count > 0 and not r.dry_run
    # The reference went to the library untouched: nothing was made in the working folder.
    assert os.listdir(pushed.work) == []
    manifest, served = registry.manifest("megacache/job", "v1")
    digest = "sha256:" + hashlib.sha256(manifest).hexdigest()
    assert r.registry == megacache.RegistryArtifact(
        "oci://%s/megacache/job@%s" % (registry.host, digest), digest, r.registry.layer_digest,
        r.registry.size)
    assert served == digest
    m = json.loads(manifest)
    assert m["mediaType"] == OCI_MANIFEST
    assert m["artifactType"].startswith("application/vnd.megacache.bundle.v")
    (layer,) = m["layers"]
    assert (layer["digest"], layer["size"]) == (r.registry.layer_digest, r.registry.size)
    assert m["annotations"]["vnd.megacache.label.job"] == "a"
    # The layer is the bundle's bytes, those a save to a file writes.
    data = registry.blob("megacache/job", layer["digest"])
    assert data == pushed.file.read_bytes()
    assert "sha256:" + hashlib.sha256(data).hexdigest() == r.registry.layer_digest
    assert len(data) == r.registry.size
    # A save to a file reports no registry.
    assert megacache.save(tmp_path / "x.mcache", None).registry is None


def test_load_from_a_reference_into_an_empty_cache_dir(tmp_path, pushed, keys):
    out = tmp_path / "out"
    r = megacache.load(pushed.ref, keys.pub, cache_dir=out)
    assert tree(out) == tree(pushed.source) and r.installed == len(tree(pushed.source))
    assert r.bundle == pushed.ref and r.roots["inductor"] == str(out)
    assert r.registry == pushed.report.registry
    # By digest too: the reference the save returned names the same bytes.
    again = megacache.load(pushed.report.registry.reference, keys.pub, cache_dir=out)
    assert again.unchanged == r.installed and again.installed == 0
    assert again.registry == pushed.report.registry
    assert megacache.load(pushed.file, keys.pub, cache_dir=out,
                          triton_dir=tmp_path / "triton").registry is None


def test_verify_and_list_a_reference(pushed, keys):
    info = megacache.verify(pushed.ref, keys.pub, require={"job": "a"})
    assert info.verified and info.bundle == pushed.ref
    assert info.registry == pushed.report.registry
    local = megacache.verify(pushed.file, keys.pub)
    assert (info.artifacts, info.labels, info.created) == (local.artifacts, local.labels,
                                                          local.created)
    assert megacache.list(pushed.ref).artifacts == local.artifacts
    with pytest.raises(megacache.VerificationError) as e:
        megacache.verify(pushed.ref, keys.other_pub)
    assert e.value.code == "untrusted_signature" and pushed.ref in e.value.message


def _change_layer(registry, pushed):
    """Flips a bit of the last byte of the bundle as the registry keeps it on disk."""
    blob = registry.blob_file(pushed.report.registry.layer_digest)
    data = bytearray(open(blob, "rb").read())
    data[-1] ^= 0x01
    os.chmod(blob, 0o644)
    with open(blob, "wb") as f:
        f.write(data)


def test_a_layer_changed_in_the_registry_is_refused_and_installs_nothing(tmp_path, registry,
                                                                         pushed, keys):
    _change_layer(registry, pushed)
    out = tmp_path / "out"
    with pytest.raises(megacache.VerificationError) as e:
        megacache.load(pushed.ref, keys.pub, cache_dir=out)
    assert e.value.message.startswith(pushed.ref)
    assert not out.exists() or tree(out) == {}
    with pytest.raises(megacache.VerificationError):
        megacache.verify(pushed.ref, keys.pub)


def test_a_layer_changed_in_the_registry_is_a_digest_mismatch(tmp_path, registry, pushed,
                                                              keys):
    _change_layer(registry, pushed)
    with pytest.raises(megacache.DigestMismatchError) as e:
        megacache.load(pushed.ref, keys.pub, cache_dir=tmp_path / "out")
    assert (e.value.code, e.value.name) == ("digest_mismatch", "MC_ERR_DIGEST_MISMATCH")


def test_warm_loads_from_a_reference_and_saves_to_one(tmp_path, registry, cuda_cache, keys,
                                                      with_env):
    # A bundle lacking one FX graph entry, pushed; the block puts that entry back.
    fx = os.path.join(cuda_cache, "fxgraph")
    shard = sorted(os.listdir(fx))[0]
    aside = tmp_path / "aside"
    shutil.move(os.path.join(fx, shard), aside)
    with_env(cuda_cache)
    base, nxt = registry.ref("megacache/warm:base"), registry.ref("megacache/warm:next")
    first = megacache.save(base, keys.sec)
    cache = tmp_path / "cache"
    with megacache.warm(base, keys.pub, save_to=nxt, secret_key=keys.sec,
                        cache_dir=cache) as w:
        assert tree(cache) == tree(cuda_cache)
        shutil.copytree(aside, cache / "fxgraph" / shard)
    assert w.loaded[0].bundle == base and w.loaded[0].registry == first.registry
    assert w.saved is not None and w.saved.bundle == nxt
    manifest, digest = registry.manifest("megacache/warm", "next")
    assert w.saved.registry.digest == digest == "sha256:" + hashlib.sha256(manifest).hexdigest()
    assert {c.what for c in w.saved.changes} == {"added"} and w.saved.artifact_count == len(
        w.saved.changes)
    # What was pushed is what the block added, and nothing else.
    out = tmp_path / "out"
    megacache.load(nxt, keys.pub, cache_dir=out)
    assert set(tree(out)) == {os.path.join("fxgraph", shard, p) for p in tree(aside)}


def test_warm_starts_cold_from_a_tag_not_pushed_yet(tmp_path, registry, cuda_cache, keys,
                                                   with_env):
    ref, nxt = registry.ref("megacache/cold:none"), registry.ref("megacache/cold:next")
    cache = tmp_path / "cache"
    with_env(str(cache))
    with megacache.warm(ref, keys.pub, save_to=nxt, secret_key=keys.sec, allow_cold=True) as w:
        shutil.copytree(cuda_cache, cache, dirs_exist_ok=True)
    assert [p for p, _ in w.cold] == [ref] and ref in w.cold[0][1] and w.loaded == []
    assert w.saved.artifact_count == len(tree(cuda_cache))
    assert registry.manifest("megacache/cold", "next")[1] == w.saved.registry.digest
    with pytest.raises(megacache.UsageError) as e:
        with megacache.warm(ref, keys.pub):
            pass
    assert e.value.code == "remote"


def test_copy_between_files_and_registries(tmp_path, registry, pushed):
    data = pushed.file.read_bytes()
    layer = "sha256:" + hashlib.sha256(data).hexdigest()
    # file -> registry
    ref = registry.ref("megacache/copy:a")
    c = megacache.copy(pushed.file, ref)
    manifest, digest = registry.manifest("megacache/copy", "a")
    assert c == megacache.CopyReport(str(pushed.file), ref, digest, layer, len(data))
    assert digest == "sha256:" + hashlib.sha256(manifest).hexdigest()
    # registry -> file, registry -> registry
    out = tmp_path / "out.mcache"
    c = megacache.copy(ref, out)
    assert out.read_bytes() == data and (c.digest, c.layer_digest, c.size) == (digest, layer,
                                                                                len(data))
    ref2 = registry.ref("megacache/other:b")
    c = megacache.copy(pushed.ref, ref2)
    assert registry.blob("megacache/other", layer) == data
    assert c.digest == registry.manifest("megacache/other", "b")[1]
    # file -> file: the digest is the bytes', an existing destination replaced
    out.write_bytes(b"old")
    c = megacache.copy(pushed.file, out)
    assert out.read_bytes() == data and c.digest == c.layer_digest == layer
    assert c.to_dict() == {"source": str(pushed.file), "destination": str(out),
                           "digest": layer, "layer_digest": layer, "size": len(data)}


def test_copy_refuses_what_is_not_a_bundle(tmp_path, registry):
    text = tmp_path / "text"
    text.write_text("not a bundle\n")
    ref = registry.ref("megacache/copy:text")
    with pytest.raises(megacache.Error) as e:
        megacache.copy(text, ref)
    assert e.value.code == "not_bundle" and str(text) in e.value.message
    with pytest.raises(urllib.error.HTTPError):
        registry.manifest("megacache/copy", "text")


def test_bad_and_missing_references(tmp_path, registry, pushed, keys, monkeypatch):
    monkeypatch.chdir(pushed.work)
    for bad in ("oci://%s/Upper/case:v1" % registry.host, "oci://%s" % registry.host,
                "oci://%s/r:bad!tag" % registry.host, "oci://%s/r@sha256:abc" % registry.host):
        with pytest.raises(megacache.UsageError) as e:
            megacache.load(bad, keys.pub, cache_dir=tmp_path / "out")
        assert bad in e.value.message and e.value.code != "remote", e.value
        with pytest.raises(megacache.UsageError) as e:
            megacache.save(bad, keys.sec)
        assert bad in e.value.message
    assert os.listdir(pushed.work) == [] and not (tmp_path / "out").exists()
    missing = registry.ref("megacache/job:nope")
    with pytest.raises(megacache.UsageError) as e:
        megacache.load(missing, keys.pub, cache_dir=tmp_path / "out",
                       registry_user="ci", registry_password=SECRET, timeout=5)
    assert e.value.code == "remote" and e.value.message.startswith(missing)
    assert "not found" in e.value.message and SECRET not in str(e.value)
    assert not (tmp_path / "out").exists()


def test_registry_settings_are_checked_and_the_password_never_shown(tmp_path, pushed, keys):
    for kw, word in (({"timeout": 0}, "timeout"), ({"timeout": "30"}, "timeout"),
                     ({"plain_http": "yes"}, "plain_http"),
                     ({"registry_user": 5}, "registry_user"),
                     ({"registry_ca": ""}, "registry_ca")):
        with pytest.raises(megacache.UsageError, match=word):
            megacache.verify(pushed.ref, keys.pub, **kw)
    with pytest.raises(megacache.UsageError) as e:
        megacache.copy(pushed.file, pushed.ref, registry_password=SECRET + "\0")
    assert "registry_password" in e.value.message and SECRET not in str(e.value)
    # Given, they do not stand in the way of an anonymous registry.
    info = megacache.verify(pushed.ref, keys.pub, plain_http=True, timeout=5)
    assert info.registry == pushed.report.registry


def test_the_tool_reads_what_the_package_pushed(tmp_path, pushed, keys):
    out = tmp_path / "cli"
    tool("load", pushed.ref, "-p", keys.pub, "--cache-dir", str(out))
    assert tree(out) == tree(pushed.source)


def test_a_login_is_given_as_arguments_and_never_shown(tmp_path, login_registry, cuda_cache,
                                                       keys, with_env, monkeypatch):
    with_env(cuda_cache)
    ref = login_registry.ref("megacache/private:v1")
    login = {"registry_user": "ci", "registry_password": SECRET}
    with pytest.raises(megacache.UsageError) as e:
        megacache.save(ref, keys.sec)
    assert e.value.code == "remote" and e.value.message.startswith(ref)
    assert "asks for a user and password, and none was found" in e.value.message
    r = megacache.save(ref, keys.sec, **login)
    assert r.registry.digest.startswith("sha256:")
    with pytest.raises(megacache.UsageError) as e:
        megacache.load(ref, keys.pub, cache_dir=tmp_path / "out", registry_user="ci",
                       registry_password="not-" + SECRET)
    assert e.value.code == "remote" and e.value.message.startswith(ref)
    assert "authentication failed (401 Unauthorized)" in e.value.message
    assert SECRET not in str(e.value)
    assert not (tmp_path / "out").exists()
    # The arguments win over the environment's login.
    monkeypatch.setenv("MEGACACHE_REGISTRY_USER", "ci")
    monkeypatch.setenv("MEGACACHE_REGISTRY_PASSWORD", "not-" + SECRET)
    out = megacache.load(ref, keys.pub, cache_dir=tmp_path / "out", **login)
    assert out.registry == r.registry and tree(tmp_path / "out") == tree(cuda_cache)
