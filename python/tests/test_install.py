"""pip install ./python works with no network, and the installed package runs."""

import os
import shutil
import subprocess
import sys

from conftest import SRCDIR


def test_pip_install_offline_in_a_venv(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)
    # A copy: pip builds in the folder it is given, which leaves build/ there.
    src = tmp_path / "python"
    shutil.copytree(os.path.join(SRCDIR, "python"), src,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    r = subprocess.run([str(venv / "bin" / "pip"), "install", str(src)],
                       capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    py = str(venv / "bin" / "python")
    r = subprocess.run([py, "-c", "import megacache, os; "
                        "print(megacache.__version__, megacache.library_version(), "
                        "os.path.isfile(os.path.join(os.path.dirname(megacache.__file__), "
                        "'py.typed')), megacache.__file__)"],
                       capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    ver, libver, typed, where = r.stdout.split()
    assert ver == libver and typed == "True" and where.startswith(str(venv))
    r = subprocess.run([py, "-m", "megacache", "--version"], capture_output=True, text=True,
                       env=env, cwd=str(tmp_path))
    assert r.returncode == 0 and ver in r.stdout
