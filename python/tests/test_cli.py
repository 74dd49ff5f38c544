"""python -m megacache is the megacache tool: the same commands run through both give the
same standard output (--json included), standard error and exit status."""

import json
import os
import shutil
import subprocess
import sys

from conftest import SRCDIR, TOOL, pymod, tool


def _env(extra):
    env = dict(extra)
    env["PYTHONPATH"] = os.path.join(SRCDIR, "python")
    return env


def twin(*args, env):
    """Runs args through the tool and through python -m megacache: the two must say the
    same and exit alike. The tool's CompletedProcess."""
    t = subprocess.run([TOOL, *args], capture_output=True, text=True, env=env)
    p = subprocess.run([sys.executable, "-m", "megacache", *args], capture_output=True,
                       text=True, env=env)
    assert (p.returncode, p.stdout, p.stderr) == (t.returncode, t.stdout, t.stderr), args
    return t


def test_the_same_output_and_exit_status_as_the_tool(tmp_path, cuda_cache, keys, env_for):
    env = _env(env_for(cuda_cache))
    b = tmp_path / "b.mcache"
    # success, with and without --json, the same bytes written
    twin("save", "-o", str(b), "-s", keys.sec, env=env)
    saved = b.read_bytes()
    r = twin("save", "-o", str(b), "-s", keys.sec, "--json", env=env)
    assert r.returncode == 0 and json.loads(r.stdout) and b.read_bytes() == saved
    for extra in ([], ["--json"]):
        r = twin("verify", str(b), "-p", keys.pub, *extra, env=env)
        assert r.returncode == 0
        # a verification failure: no signature by a trusted key (the JSON's code is the
        # tool's, not the library's MC_ERR_ name)
        r = twin("verify", str(b), "-p", keys.other_pub, *extra, env=env)
        assert r.returncode == 1 and str(b) in r.stderr and "MC_ERR" not in r.stdout
        assert not extra or json.loads(r.stdout)
        # usage errors: a missing operand, an option the tool does not take
        r = twin("load", *extra, env=env)
        assert r.returncode == 2 and r.stderr
        r = twin("list", str(b), "--pubkey", keys.pub, *extra, env=env)
        assert r.returncode == 2
        r = twin("verify", str(b), "--pub", keys.pub, *extra, env=env)
        assert r.returncode == 2
    # the tool's options: no key, its warnings (and the GPU one, where no GPU is seen)
    r = twin("load", str(b), "--insecure-no-verify", "--dry-run", "--cache-dir",
             str(tmp_path / "d"), env=env)
    assert r.returncode == 0 and "--insecure-no-verify" in r.stderr
    r = twin("--version", env=env)
    assert r.returncode == 0 and r.stdout


def test_a_closed_pipe_ends_it_as_it_ends_the_tool(tmp_path, bundle, env_for):
    # list | head -1: head leaves after one line; neither says anything of the pipe.
    env = _env(env_for(str(tmp_path / "cache")))
    out = {}
    for name, cmd in (("tool", [TOOL]), ("python", [sys.executable, "-m", "megacache"])):
        line = " ".join("'%s'" % a for a in [*cmd, "list", str(bundle)])
        r = subprocess.run(["sh", "-c", line + " | head -n 1"], capture_output=True,
                           text=True, env=env)
        out[name] = (r.stdout, r.stderr)
    assert out["python"] == out["tool"] and len(out["tool"][0].splitlines()) == 1, out
    assert "Traceback" not in out["python"][1] and "Broken" not in out["python"][1], out
    # A pipe closed before the first write: the tool dies of SIGPIPE, as from a shell
    # (Python ignores SIGPIPE, and an ignored signal would stay ignored in the tool).
    ends = {}
    for name, cmd in (("tool", [TOOL]), ("python", [sys.executable, "-m", "megacache"])):
        r, w = os.pipe()
        os.close(r)
        p = subprocess.run([*cmd, "list", str(bundle)], stdout=w, stderr=subprocess.PIPE,
                           text=True, env=env)
        os.close(w)
        ends[name] = (p.returncode, p.stderr)
    assert ends["python"] == ends["tool"] == (-13, ""), ends


def test_run_passes_on_the_command_s_status_and_signal(tmp_path, env_for):
    env = _env(env_for(str(tmp_path / "cache")))
    r = twin("run", "--", sys.executable, "-c", "import sys; sys.exit(3)", env=env)
    assert r.returncode == 3
    r = twin("run", "--", sys.executable, "-c", "import os; os.kill(os.getpid(), 15)",
             env=env)
    assert r.returncode == -15, r


def _prefix(tmp_path, bin_names):
    """A prefix holding a copy of the library in lib/ and, in bin/, a script for each
    name of bin_names that says its name and arguments and exits 7."""
    lib = tmp_path / "prefix" / "lib"
    lib.mkdir(parents=True)
    shutil.copy(os.environ["MEGACACHE_LIBRARY"], lib / "libmegacache.so.0")
    (tmp_path / "prefix" / "bin").mkdir()
    for name in bin_names:
        f = tmp_path / "prefix" / "bin" / name
        f.write_text('#!/bin/sh\necho "prefix tool: $*"\nexit 7\n')
        f.chmod(0o755)
    env = _env(dict(os.environ, MEGACACHE_LIBRARY=str(lib / "libmegacache.so.0"),
                    PATH="/nonexistent"))
    env.pop("MEGACACHE_TOOL", None)
    return env


def test_the_tool_beside_the_library_loaded(tmp_path):
    env = _prefix(tmp_path, ["megacache"])
    r = pymod("verify", "x y", env=env)
    assert (r.returncode, r.stdout, r.stderr) == (7, "prefix tool: verify x y\n", "")
    env["MEGACACHE_TOOL"] = TOOL
    r = pymod("--version", env=env)
    assert (r.returncode, r.stdout) == (0, tool("--version").stdout)


def test_no_tool_is_one_line_naming_where_it_looked(tmp_path):
    env = _prefix(tmp_path, [])
    r = pymod("list", "b.mcache", env=env)
    prefix = tmp_path / "prefix"
    assert r.returncode == 2 and r.stdout == "" and len(r.stderr.splitlines()) == 1, r.stderr
    assert r.stderr.startswith("megacache: no megacache tool found; looked in %s, %s, %s"
                               % (prefix / "bin" / "megacache", tmp_path / "bin" / "megacache",
                                  "/nonexistent/megacache")), r.stderr
    assert "MEGACACHE_TOOL" in r.stderr
