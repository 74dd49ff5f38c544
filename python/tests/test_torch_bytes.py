"""torch's bytes in and out: save_cache_artifacts()[0] -> bundle -> load_cache_artifacts()."""

import os

import pytest

import megacache
from conftest import BLOBS, DATA, tool, tool_json


@pytest.mark.parametrize("name", BLOBS)
def test_blob_round_trips_byte_for_byte(tmp_path, keys, name):
    blob = open(os.path.join(DATA, name), "rb").read()
    out = tmp_path / "b.mcache"
    r = megacache.pack_torch_artifacts(blob, out, keys.sec, labels=["torch=2.11.0"])
    assert r.signatures == megacache.list(out).signatures and r.signature_count == 1
    assert r.artifact_count > 0
    # what the bundle holds (the pgo blob repeats a key: the last is kept)
    listed = megacache.list(out).artifacts
    assert (r.artifact_count, r.bytes) == (len(listed), sum(a.size for a in listed))
    assert megacache.torch_artifacts(out, keys.pub) == blob
    # The tool reads what the package wrote, and packs the same artifacts.
    tool("export", str(out), "--torch", str(tmp_path / "t.bin"), "-p", keys.pub)
    assert (tmp_path / "t.bin").read_bytes() == blob
    tool("pack", "-o", str(tmp_path / "cli.mcache"), "--from-torch", os.path.join(DATA, name),
         "-s", keys.sec, "--label", "torch=2.11.0")
    assert tool_json("list", str(tmp_path / "cli.mcache"))["artifacts"] == [
        a.__dict__ for a in megacache.list(out).artifacts]


def test_blob_from_bytearray_and_memoryview(tmp_path, keys):
    blob = open(os.path.join(DATA, BLOBS[0]), "rb").read()
    for i, form in enumerate((bytearray(blob), memoryview(blob))):
        out = tmp_path / ("b%d.mcache" % i)
        megacache.pack_torch_artifacts(form, out, keys.sec)
        assert megacache.torch_artifacts(out, keys.pub) == blob


def test_torch_2_7_format_differs_and_reads_back(tmp_path, keys):
    blob = open(os.path.join(DATA, BLOBS[0]), "rb").read()
    out = tmp_path / "b.mcache"
    megacache.pack_torch_artifacts(blob, out, keys.sec)
    old = megacache.torch_artifacts(out, keys.pub, torch_format="2.7")
    assert old != blob
    again = tmp_path / "again.mcache"
    megacache.pack_torch_artifacts(old, again, keys.sec)
    assert [(a.type, a.key, a.hash) for a in megacache.list(again).artifacts] == [
        (a.type, a.key, a.hash) for a in megacache.list(out).artifacts]


def test_garbage_bytes_are_refused_and_nothing_is_written(tmp_path, keys):
    out = tmp_path / "b.mcache"
    with pytest.raises(megacache.UsageError) as e:
        megacache.pack_torch_artifacts(b"\x00\x01 not a blob at all", out, keys.sec)
    assert e.value.name == "MC_ERR_TORCH_FORMAT" and e.value.number == -20
    assert "torch blob in memory" in e.value.message
    assert not out.exists() and os.listdir(tmp_path) == []


def test_torch_artifacts_needs_a_trusted_signature(tmp_path, keys):
    blob = open(os.path.join(DATA, BLOBS[0]), "rb").read()
    out = tmp_path / "b.mcache"
    megacache.pack_torch_artifacts(blob, out, keys.sec)
    with pytest.raises(megacache.VerificationError) as e:
        megacache.torch_artifacts(out, keys.other_pub)
    assert e.value.name == "MC_ERR_NO_SIGNATURE"
