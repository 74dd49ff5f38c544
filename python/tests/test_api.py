"""What the package shows of itself: its API, not what its code imports."""

import typing

import megacache


def test_dir_is_the_api():
    public = [n for n in dir(megacache) if not n.startswith("_")]
    assert public == sorted({*megacache.__all__, "list", "list_bundle"} - {"__version__"})
    for name in ("Callable", "Dict", "List", "Optional", "Union", "os", "ctypes", "sys",
                 "annotations", "TerminalBar", "U64", "PathArg"):
        assert name not in public, name
    assert not set(public) & set(typing.__all__)
    for name in public:
        assert getattr(megacache, name) is not None, name
    assert "__version__" in dir(megacache) and "__doc__" in dir(megacache)
    assert megacache.list is megacache.list_bundle
