# timing.sh - what bench.sh and vllm.sh time with, sourced by them after they set WORK
# and BENCH (the name their messages start with).

# t NAME CMD...: runs CMD under GNU time, appends "wall rss_kb user sys" to $WORK/NAME.times.
t() {
	name=$1
	shift
	/usr/bin/time -f "%e %M %U %S" -o "$WORK/.t" "$@" >/dev/null 2>"$WORK/.err" || {
		echo "$BENCH: $name failed: $(tail -3 "$WORK/.err")" >&2
		exit 1
	}
	cat "$WORK/.t" >> "$WORK/$name.times"
}

median() { # median COLUMN FILE (COLUMN 0: user plus system time)
	awk -v c="$1" '{ print c ? $c : $3 + $4 }' "$2" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# settle FILE...: written-back, dropped (when allowed) page cache, then FILEs read once.
settle() {
	sync
	[ -w /proc/sys/vm/drop_caches ] && echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || :
	for f in "$@"; do
		if [ -d "$f" ]; then tar -cf - -C "$f" . | cat > /dev/null; else cat "$f" > /dev/null; fi
	done
}
