"""python -m megacache: the tool's commands, options and exit statuses."""

import json
import os
import subprocess
import sys

from conftest import SRCDIR, pymod, tool, tool_json, tree


def _env(extra):
    env = dict(extra)
    env["PYTHONPATH"] = os.path.join(SRCDIR, "python")
    return env


def test_save_load_verify_list(tmp_path, cuda_cache, keys, env_for):
    env = _env(env_for(cuda_cache))
    b = tmp_path / "b.mcache"
    r = pymod("save", "-o", str(b), "-s", keys.sec, "--json", env=env)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    tool("save", "-o", str(tmp_path / "c.mcache"), "-s", keys.sec, env=env)
    assert b.read_bytes() == (tmp_path / "c.mcache").read_bytes()
    # the tool's names: artifact_count a number, artifacts an array
    tj = tool_json("save", "-o", str(tmp_path / "t.mcache"), "--dry-run", env=env)
    assert j["artifact_count"] == tj["artifact_count"] == len(tool_json("list", str(b))["artifacts"])
    assert "artifacts" not in j
    assert [f["artifact_count"] for f in j["folders"]] == [f["artifact_count"] for f in tj["folders"]]

    r = pymod("load", str(b), "-p", keys.pub, "--cache-dir", str(tmp_path / "d"), "--json",
              env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["installed"] == j["artifact_count"]
    assert tree(tmp_path / "d") and set(tree(tmp_path / "d")) <= set(tree(cuda_cache))

    r = pymod("verify", str(b), "-p", keys.pub, env=env)
    assert r.returncode == 0 and "OK" in r.stdout
    r = pymod("verify", str(b), "-p", keys.pub, "--json", env=env)
    assert r.returncode == 0, r.stderr
    v = json.loads(r.stdout)
    assert v["artifact_count"] == j["artifact_count"] and "artifacts" not in v, v
    r = pymod("list", str(b), "--json", env=env)
    assert json.loads(r.stdout)["artifacts"] == tool_json("list", str(b))["artifacts"]


def test_exit_statuses(tmp_path, cuda_cache, keys, env_for):
    env = _env(env_for(cuda_cache))
    b = tmp_path / "b.mcache"
    tool("save", "-o", str(b), "-s", keys.sec, env=env)
    r = pymod("verify", str(b), "-p", keys.other_pub, env=env)
    assert r.returncode == 1 and r.stderr.startswith("megacache: ") and str(b) in r.stderr
    r = pymod("load", str(tmp_path / "none.mcache"), "-p", keys.pub, env=env)
    assert r.returncode == 2 and "none.mcache" in r.stderr
    r = pymod("load", env=env)
    assert r.returncode == 2 and "usage" in r.stderr
    r = pymod("verify", str(b), "-p", keys.other_pub, "--json", env=env)
    assert r.returncode == 1 and json.loads(r.stdout)["error"] == "MC_ERR_NO_SIGNATURE"


def test_run_loads_runs_and_saves_what_is_new(tmp_path, cuda_cache, keys, env_for):
    env = _env(env_for(str(tmp_path / "cache")))
    src = env_for(cuda_cache)
    b = tmp_path / "b.mcache"
    tool("save", "-o", str(b), "-s", keys.sec, env=src)
    out = tmp_path / "next.mcache"
    script = "import sys; sys.exit(3)"
    r = pymod("run", "-b", str(b), "-p", keys.pub, "--save-to", str(out), "-s", keys.sec,
              "--", sys.executable, "-c", script, env=env)
    assert r.returncode == 3, r.stderr
    assert "nothing new" in r.stderr and not out.exists()
    assert tree(tmp_path / "cache") and set(tree(tmp_path / "cache")) <= set(tree(cuda_cache))
    r = pymod("run", "-p", keys.pub, "--", "/nonexistent/cmd", env=env)
    assert r.returncode == 127


def test_run_passes_on_signals_and_the_command_s_status(tmp_path, cuda_cache, keys, env_for):
    env = _env(env_for(str(tmp_path / "cache")))
    r = pymod("run", "--", sys.executable, "-c", "import os; os.kill(os.getpid(), 15)",
              env=env)
    assert r.returncode == -15
    # The command failed and the save failed too: the command's status wins.
    r = pymod("run", "--save-to", str(tmp_path / "no" / "x.mcache"), "--", sys.executable,
              "-c", "import os, shutil, sys; d = os.environ['TORCHINDUCTOR_CACHE_DIR']; "
              "shutil.copytree(sys.argv[1], os.path.join(d, 'fxgraph')); sys.exit(3)",
              os.path.join(cuda_cache, "fxgraph"), env=env)
    assert r.returncode == 3 and "x.mcache" in r.stderr, r.stderr
    assert "nothing new" not in r.stderr and not (tmp_path / "no").exists()
    r = pymod("run", "-b", str(tmp_path / "b.mcache"), "--allow-cold", "--", "true", env=env)
    assert r.returncode == 2 and "-p PUBFILE" in r.stderr


def test_long_options_by_their_whole_names_only(tmp_path, bundle, keys, env_for):
    # argparse takes any unambiguous start of a long option by default (--pub for
    # --pubkey): a script's typo would run. Refused, exit 2, as the tool refuses it.
    env = _env(env_for(str(tmp_path / "cache")))
    r = pymod("verify", str(bundle), "--pub", keys.pub, env=env)
    assert r.returncode == 2 and "unrecognized arguments: --pub" in r.stderr, r.stderr
    r = pymod("verify", str(bundle), "--pubkey", keys.pub, env=env)
    assert r.returncode == 0, r.stderr


def test_load_dry_run_says_the_counts_as_a_load(tmp_path, bundle, keys, env_for):
    # One line, as a load's; not a line per artifact.
    env = _env(env_for(str(tmp_path / "cache")))
    r = pymod("load", str(bundle), "-p", keys.pub, "--cache-dir", str(tmp_path / "d"),
              "--dry-run", env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("would install ") and len(r.stdout.splitlines()) == 1, r.stdout
    assert not (tmp_path / "d").exists()


def test_keygen_without_a_password_says_so_in_one_line(tmp_path, env_for):
    env = _env(env_for(str(tmp_path / "cache")))
    sec = str(tmp_path / "k.key")
    r = subprocess.run([sys.executable, "-m", "megacache", "keygen", "-p", str(tmp_path / "k.pub"),
                        "-s", sec], capture_output=True, text=True, env=env,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 2 and r.stderr == (
        "megacache: %s: no password given: there is no terminal to ask it on; use "
        "--password-file, or -W for an unencrypted key\n" % sec), r.stderr
    assert not os.path.exists(sec)
