# docs.sh - the user documents (README.md, doc/*.md, examples' READMEs): README.md is a
# front door of at most 400 lines whose table of contents links each of its sections;
# every doc/*.md page is linked from it; every relative link points at a file that exists
# and every anchor at a heading there; no document carries a dated heading, a date or a
# commit hash in its prose, or the history of a figure ("first pass", "Earlier runs").
. "$(dirname "$0")/lib.sh"
if [ ! -x /usr/bin/python3 ]; then
	echo "SKIP: no /usr/bin/python3"
	exit 77
fi

# One line per check: "ok", or what is wrong.
/usr/bin/python3 - "$MC_SRCDIR" >"$T/results" <<'EOF'
import glob, os, re, sys

top = sys.argv[1]
MAX_README_LINES = 400


def prose(path):
    """The lines of a Markdown file as (number, text, in_code): fenced blocks marked."""
    out, fence = [], None
    with open(os.path.join(top, path), encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            m = re.match(r"^\s*(```+|~~~+)", line)
            if m:
                if fence is None:
                    fence = m.group(1)[:3]
                elif m.group(1).startswith(fence):
                    fence = None
                out.append((n, line, True))
                continue
            out.append((n, line, fence is not None))
    return out


def slug(text):
    """The anchor a heading gets, as GitHub makes it."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def headings(path):
    seen, out = {}, []
    for n, line, code in prose(path):
        m = None if code else re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if m:
            s = slug(m.group(2))
            k = seen.get(s, 0)
            seen[s] = k + 1
            out.append((len(m.group(1)), m.group(2), s if k == 0 else "%s-%d" % (s, k)))
    return out


def links(path):
    """(line, target) of each inline link outside code."""
    out = []
    for n, line, code in prose(path):
        if code:
            continue
        line = re.sub(r"`[^`]*`", "", line)
        for m in re.finditer(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", line):
            out.append((n, m.group(1)))
    return out


docs = ["README.md"] + sorted(os.path.relpath(p, top) for p in glob.glob(top + "/doc/*.md"))
docs += sorted(os.path.relpath(p, top)
               for p in glob.glob(top + "/examples/**/README*", recursive=True))

# README.md: short, with a table of contents that links every section.
with open(os.path.join(top, "README.md"), encoding="utf-8") as f:
    count = sum(1 for _ in f)
print("ok" if count <= MAX_README_LINES else
      "README.md has %d lines, more than %d" % (count, MAX_README_LINES))
heads = headings("README.md")
anchors = {s for _, _, s in heads}
toc, in_toc = [], False
for n, line, code in prose("README.md"):
    if code:
        continue
    if re.match(r"^#{1,6}\s", line):
        in_toc = re.match(r"^##\s+(Contents|Table of contents)\s*$", line) is not None
        continue
    if in_toc:
        toc += re.findall(r"\]\(#([^)\s]+)\)", line)
print("ok" if toc else "README.md has no table of contents (a '## Contents' list of links)")
for a in toc:
    print("ok" if a in anchors else "README.md's table of contents links #%s: no such heading" % a)
for level, text, s in heads:
    if level == 2 and s not in ("contents", "table-of-contents"):
        print("ok" if s in toc else "README.md's table of contents lacks '%s' (#%s)" % (text, s))

# Every page under doc/ is reached from README.md.
readme_targets = {t.split("#")[0] for _, t in links("README.md")}
for d in docs:
    if d.startswith("doc/"):
        print("ok" if d in readme_targets else "README.md does not link %s" % d)

# Every relative link resolves: its file exists, its anchor is a heading there.
for d in docs:
    for n, target in links(d):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue  # http:, https:, mailto:
        path, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(d), path)) if path else d
        if not os.path.exists(os.path.join(top, dest)):
            print("%s:%d: link to %s: no such file" % (d, n, target))
            continue
        if anchor and dest.endswith(".md"):
            ok = anchor in {s for _, _, s in headings(dest)}
            print("ok" if ok else "%s:%d: link to %s: no such heading in %s" % (d, n, target, dest))
        else:
            print("ok")

# No history: no dated heading, no date or history words in prose, no commit hash.
HASH = re.compile(r"(?<![0-9A-Za-z])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])"
                  r"(?:[0-9a-f]{7,12}|[0-9a-f]{40})(?![0-9A-Za-z])")
DATE = re.compile(r"\b20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]\b")
WORDS = re.compile(r"\b(first|second|third) pass\b|\bearlier runs?\b|\blatest run\b",
                   re.IGNORECASE)
for d in docs:
    found = 0
    for n, line, code in prose(d):
        text = line if code else re.sub(r"`[^`]*`", "", line)
        why = None
        if re.match(r"^#.*20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]", line) and not code:
            why = "a dated heading"
        elif not code and DATE.search(text):
            why = "a date in its prose"
        elif WORDS.search(text):
            why = "the history of a figure (%s)" % WORDS.search(text).group(0)
        elif HASH.search(line):
            why = "what looks like a commit hash (%s)" % HASH.search(line).group(0)
        if why:
            found += 1
            print("%s:%d: %s: %s" % (d, n, why, line.strip()[:100]))
    if not found:
        print("ok")

# doc/internals.md names the library's parts as lib/README.md's layer table lists them.
with open(os.path.join(top, "lib/README.md"), encoding="utf-8") as f:
    table = f.read().split("<!-- layers -->")[1].split("<!-- end layers -->")[0]
parts = [line.split()[0] for line in table.splitlines() if re.match(r"^[a-z]+( |$)", line)]
with open(os.path.join(top, "doc/internals.md"), encoding="utf-8") as f:
    m = re.search(r"in parts that depend one way \(([a-z, \n]+)\)", f.read())
named = [w for w in re.split(r"[,\s]+", m.group(1)) if w] if m else []
print("ok" if named == parts else "doc/internals.md names the parts %s, lib/README.md %s"
      % (", ".join(named) or "nowhere", ", ".join(parts)))
EOF
[ $? -eq 0 ] && ok || bad "the document checks did not run to the end"
tally "$T/results"

finish
