"""The megacache package's metadata, for setuptools' build backend (pyproject.toml):
pure Python over the installed libmegacache (ctypes), so nothing is compiled. Here
rather than in pyproject.toml's [project] table: the setuptools of Debian 12 (66) warns
that its [tool.setuptools] table, which the version and py.typed would need, is beta."""

import os

from setuptools import setup

HERE = os.path.dirname(os.path.abspath(__file__))
VERSION = {}
with open(os.path.join(HERE, "megacache", "_version.py")) as f:
    exec(f.read(), VERSION)

setup(
    name="megacache",
    version=VERSION["__version__"],
    description="torch.compile caches in one signed bundle: Python bindings of libmegacache",
    long_description=("Verify, install and record PyTorch compile-cache bundles from inside "
                      "the Python process, over the C library libmegacache.so.0."),
    packages=["megacache"],
    package_data={"megacache": ["py.typed"]},
    python_requires=">=3.9",
    zip_safe=False,
)
