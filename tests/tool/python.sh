#!/bin/sh
# python.sh - the Python package's pytest suite (python/tests), run with Debian's
# /usr/bin/python3 and python3-pytest against the library just built, each test in a
# forked child (pytest-forked) so that a crash in the library fails one test only.
. "$MC_SRCDIR/tests/tool/lib.sh"

if [ -n "${MC_SANITIZED:-}" ]; then
	# An instrumented library cannot be loaded into an uninstrumented interpreter.
	echo "SKIP: the library is built with sanitizers, which an uninstrumented python3 cannot load"
	exit 77
fi
MEGACACHE_LIBRARY="$MC_BUILDDIR/lib/.libs/libmegacache.so.0"
export MEGACACHE_LIBRARY
PYTHONDONTWRITEBYTECODE=1
export PYTHONDONTWRITEBYTECODE
PYTHONPATH="$MC_SRCDIR/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONPATH
# The tool the tests compare with, without the valgrind wrapper of check-valgrind.
MEGACACHE="$MC_BUILDDIR/bin/megacache"
export MEGACACHE
cd "$T" || exit 1
/usr/bin/python3 -m pytest -p no:cacheprovider --forked -q -rfE \
	--basetemp="$T/pytest" "$MC_SRCDIR/python/tests" >"$T/pytest.out" 2>&1
rc=$?
cat "$T/pytest.out"
# Each pytest test counts as a check here.
summary=$(tail -n 1 "$T/pytest.out")
count() { # count WORD: the number before WORD in pytest's last line ("3 failed, 30 passed")
	printf '%s\n' "$summary" | tr -d ',' | awk -v w="$1" '{ for (i = 2; i <= NF; i++)
		if ($i == w || $i == w "s") n += $(i - 1) } END { print n + 0 }'
}
PASSED=$((PASSED + $(count passed)))
FAILED=$((FAILED + $(count failed) + $(count error)))
[ "$rc" -eq 0 ] || [ "$FAILED" -gt 0 ] || bad "pytest exited $rc: $summary"
finish
