"""pip installs ./python with no network, through pyproject.toml's build backend (never
pip's legacy `setup.py install`, which it warns of), and the installed package runs."""

import os
import shutil
import subprocess
import sys

from conftest import SRCDIR

OFFLINE = {"PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
           "PIP_ROOT_USER_ACTION": "ignore"}


def pip_install(tmp_path, pip, *args):
    """Runs pip install with args on a copy of python/ (pip builds in the folder it is
    given, which leaves build/ there); what it printed."""
    env = dict(os.environ, **OFFLINE)
    env.pop("PYTHONPATH", None)
    src = tmp_path / "python"
    shutil.copytree(os.path.join(SRCDIR, "python"), src,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    r = subprocess.run([*pip, "install", "--no-cache-dir", "--no-build-isolation", *args,
                        str(src)], capture_output=True, text=True, env=env, cwd=str(tmp_path))
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    # pip names how it builds: "Building wheel for megacache (pyproject.toml)".
    assert "(pyproject.toml)" in out, out
    for legacy in ("DEPRECATION", "legacy", "setup.py"):
        assert legacy not in out, out
    return out


def run_installed(tmp_path, py, env=None):
    """The installed package's version, the library's, and where it was imported from."""
    env = dict(env or os.environ, **OFFLINE)
    r = subprocess.run([py, "-c", "import megacache, os; "
                        "print(megacache.__version__, megacache.library_version(), "
                        "os.path.isfile(os.path.join(os.path.dirname(megacache.__file__), "
                        "'py.typed')), megacache.__file__)"],
                       capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    ver, libver, typed, where = r.stdout.split()
    assert ver == libver and typed == "True"
    return ver, where


def test_pip_install_offline_into_a_target_folder(tmp_path):
    site = tmp_path / "site"
    pip_install(tmp_path, [sys.executable, "-m", "pip"], "--no-deps", "--target", str(site))
    env = dict(os.environ, PYTHONPATH=str(site))
    ver, where = run_installed(tmp_path, sys.executable, env)
    assert where == str(site / "megacache" / "__init__.py")


def test_pip_install_offline_in_a_venv(tmp_path):
    # The venv sees the system's setuptools and wheel, which build the package offline.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True)
    pip_install(tmp_path, [str(venv / "bin" / "pip")])
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    py = str(venv / "bin" / "python")
    ver, where = run_installed(tmp_path, py, env)
    assert where.startswith(str(venv))
    r = subprocess.run([py, "-m", "megacache", "--version"], capture_output=True, text=True,
                       env=env, cwd=str(tmp_path))
    assert r.returncode == 0 and ver in r.stdout
