# options.sh - every command's options told alike wherever they are told, and taken by
# the command. What megacache CMD --help names (short and long), CMD takes, and the bash
# completion offers CMD, no more; the man page gives it in CMD's synopsis (but for the
# options its OPTIONS give every command) and describes it: in an OPTIONS entry that
# names CMD, or else in CMD's entry of COMMANDS. What the synopsis or the overview
# (megacache --help) gives CMD is in its help; what its help's usage cannot go without,
# they cannot either; an OPTIONS entry, or one of the overview's common options, with a
# list of commands names exactly those whose help names it. A gap is named by command,
# option and place.
. "$(dirname "$0")/lib.sh"
if ! command -v bash >/dev/null 2>&1; then
	echo "SKIP: no bash"
	exit 77
fi

# The options are tried on the binary itself, not its libtool wrapper: a few hundred runs.
BIN="$MC_BUILDDIR/bin/.libs/megacache"
[ -x "$BIN" ] || BIN=$MEGACACHE
export LD_LIBRARY_PATH="$MC_BUILDDIR/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

/usr/bin/python3 - "$BIN" "$MC_SRCDIR/doc/megacache.1" "$MC_SRCDIR/doc/completion.bash" \
	"$T" >"$T/results" 2>&1 <<'EOF'
import re, subprocess, sys
from concurrent.futures import ThreadPoolExecutor

tool, man_path, comp_path, tmp = sys.argv[1:]
OPT = re.compile(r"(?<![^\s\[(|,])(--?[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*)")

def say(ok, msg=""):
    print("ok" if ok else "FAIL: " + msg)

def megacache(*args):
    p = subprocess.run([tool, *args], cwd=tmp, stdin=subprocess.DEVNULL,
                       capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr

def options(text):
    return set(OPT.findall(text))

def required(usage):
    """The options of a usage text outside its [...]: those it cannot go without (one
    of a (A | B) group each)."""
    depth, req = 0, set()
    for m in re.finditer(r"\[|\]|" + OPT.pattern, usage):
        tok = m.group(0)
        if tok == "[":
            depth += 1
        elif tok == "]":
            depth -= 1
        elif depth == 0:
            req.add(tok)
    return req

def listed(text):
    """The commands a leading parenthesis names: (verify, load), (every command),
    (every command but run, ...). None: the text names none."""
    m = re.match(r"\s*\(([^)]*)\)", text)
    if not m:
        return None
    words = re.findall(r"[a-z]+", m.group(1))
    if "every" in words:
        but = words[words.index("but") + 1:] if "but" in words else []
        return set(CMDS) - set(w for w in but if w in CMDS)
    return set(w for w in words if w in CMDS) or None

# The overview: its commands, each one's block (the usage lines, then the lines of its
# description, indented 8) and the common options.
overview = megacache("--help")[1]
section = re.search(r"\ncommands:\n(.*?)\n\n", overview, re.S).group(1)
CMDS, ov_usage, ov_block = [], {}, {}
for line in section.split("\n"):
    m = re.match(r"  ([a-z]+) ", line)
    if m:
        cmd = m.group(1)
        CMDS.append(cmd)
        ov_usage[cmd] = ov_block[cmd] = line[len(cmd) + 2:]
    elif not line.startswith(" " * 8):
        ov_usage[cmd] += " " + line
        ov_block[cmd] += " " + line
    else:
        ov_block[cmd] += " " + line
ov_common = re.search(r"\ncommon options:\n(.*?)\n\n", overview, re.S).group(1)

# Each command's help: all its options, those of its usage lines, the required ones.
helps, usage = {}, {}
for cmd in CMDS:
    text = megacache(cmd, "--help")[1]
    helps[cmd] = options(text)
    usage[cmd] = re.match(r"usage: megacache \S+(.*?)\n(?! )", text, re.S).group(1)

# The man page, its roff read as text: "\-" a dash, fonts and quotes dropped, a line's
# macro left out.
def plain(line):
    line = re.sub(r"\\f[BIRP]|\\&", "", line.replace("\\-", "-")).replace('"', " ")
    return re.sub(r"^\.[A-Z]+\s*", "", line) if line.startswith(".") else line

man = open(man_path, encoding="utf-8").read().split("\n")
sections, name = {}, None
for line in man:
    if line.startswith(".SH "):
        name = line[4:].strip()
        sections[name] = []
    elif name is not None:
        sections[name].append(line)

synopsis = {}
for block in "\n".join(sections["SYNOPSIS"]).split("\n.br\n"):
    m = re.match(r"\.B megacache (\S+)\n(.*)", block, re.S)
    if m and m.group(1) in CMDS:
        synopsis[m.group(1)] = " ".join(plain(l) for l in m.group(2).split("\n"))

commands, cmd = {}, None # COMMANDS: .TP, .B CMD, its text
lines = sections["COMMANDS"]
for i, line in enumerate(lines):
    m = re.match(r"\.B (\S+)$", line)
    if m and i > 0 and lines[i - 1] == ".TP" and m.group(1) in CMDS:
        cmd = m.group(1)
        commands[cmd] = ""
    elif cmd is not None:
        commands[cmd] += " " + plain(line)

entries, entry = [], None # OPTIONS: .TP, its head lines (.TQ more), its text
lines = sections["OPTIONS"]
for i, line in enumerate(lines):
    if line in (".TP", ".TQ"):
        if line == ".TP":
            entry = {"head": set(), "text": ""}
            entries.append(entry)
        entry["head"] |= options(plain(lines[i + 1]))
    elif line.startswith((".PP", ".SS")):
        entry = None
    elif entry is not None and i > 0 and lines[i - 1] not in (".TP", ".TQ"):
        entry["text"] += " " + plain(line)
# --version is the tool's (megacache --version), no command's.
for e in entries:
    e["head"] -= {"--version", "-V"}
entries = [e for e in entries if e["head"]]
for e in entries:
    e["cmds"] = listed(e["text"])
every = set().union(*(e["head"] for e in entries if e["cmds"] is None))
for e in entries:
    if e["cmds"] is None:
        e["cmds"] = set(CMDS)

# The completion: the options it offers each command.
script = '. "$1"; shift; for c; do COMP_WORDS=(megacache "$c" -); COMP_CWORD=2; ' \
    '_megacache; echo "$c ${COMPREPLY[*]}"; done'
out = subprocess.run(["bash", "-c", script, "_", comp_path, *CMDS], capture_output=True,
                     text=True).stdout
completion = {l.split()[0]: set(l.split()[1:]) for l in out.strip().split("\n")}
comp_cmds = re.search(r'_megacache_commands="([^"]*)"', open(comp_path).read()).group(1)

# The commands: the overview's, the man page's and the completion's.
for where, names in (("the man page's synopsis", set(synopsis)),
                     ("the man page's COMMANDS", set(commands)),
                     ("the completion", set(comp_cmds.split()) - {"help"})):
    say(names == set(CMDS), "the overview's commands are %s; %s has %s" %
        (" ".join(sorted(CMDS)), where, " ".join(sorted(names))))

def refused(pair):
    """Whether the command refuses the option as one it does not know. Given alone: one
    that asks for an argument is known; any other complaint is not the option's."""
    out = megacache(*pair)[1]
    return bool(re.search(r"(unknown|invalid|unexpected|unrecognized|ambiguous) option", out))

with ThreadPoolExecutor(4) as pool:
    pairs = [(c, o) for c in CMDS for o in sorted(helps[c])]
    refusals = dict(zip(pairs, pool.map(refused, pairs)))

def not_taken(cmd, opt):
    if (cmd, opt) not in refusals:
        refusals[cmd, opt] = refused((cmd, opt))
    return refusals[cmd, opt]

for cmd in CMDS:
    own = helps[cmd] - every # described for this command, not for all
    syn = options(synopsis.get(cmd, ""))
    req = required(usage[cmd])
    # What the help names is taken, and told by the man page and the completion.
    for o in sorted(helps[cmd]):
        say(not not_taken(cmd, o), "%s --help names %s; megacache %s %s says: unknown" %
            (cmd, o, cmd, o))
        say(o in completion[cmd], "%s --help names %s; the completion of %s does not" %
            (cmd, o, cmd))
    for o in sorted(own):
        say(o in syn, "%s --help names %s; the man page's synopsis of %s does not" %
            (cmd, o, cmd))
        # An option with an entry in OPTIONS is checked below; the others are told in
        # the command's entry of COMMANDS.
        if not any(o in e["head"] for e in entries):
            say(o in options(commands.get(cmd, "")), "%s --help names %s; the man page "
                "tells it neither in OPTIONS nor in the COMMANDS entry of %s" % (cmd, o, cmd))
    for o in sorted(req):
        say(o in required(synopsis.get(cmd, "")), "%s --help's usage requires %s; the "
            "man page's synopsis of %s does not" % (cmd, o, cmd))
        say(o in required(ov_usage[cmd]), "%s --help's usage requires %s; its line in "
            "megacache --help does not" % (cmd, o))
    # And what the others tell of the command is in its help, and taken.
    for where, told in (("the man page's synopsis of %s" % cmd, syn),
                        ("the completion of %s" % cmd, completion[cmd]),
                        ("its line in megacache --help", options(ov_block[cmd]))):
        for o in sorted(told - helps[cmd]):
            say(False, "%s names %s; %s --help does not%s" % (where, o, cmd,
                ", and megacache %s %s says: unknown" % (cmd, o) if not_taken(cmd, o) else ""))
    for where, text in (("the man page's synopsis", synopsis.get(cmd, "")),
                        ("its line in megacache --help", ov_usage[cmd])):
        for o in sorted(required(text) & options(usage[cmd]) - req):
            say(False, "%s of %s requires %s; %s --help's usage does not" %
                (where, cmd, o, cmd))

# An option's entries in OPTIONS (no list: every command; -o is run's --save-to too),
# or in the overview's common options, name exactly the commands whose help names it.
for o in sorted(set().union(*(e["head"] for e in entries))):
    takes = set(c for c in CMDS if o in helps[c])
    named = set()
    for e in (e for e in entries if o in e["head"]):
        named |= e["cmds"]
        for c in sorted(e["cmds"] - takes):
            say(False, "the man page's OPTIONS entry of %s names %s; %s --help does not" %
                (o, c, c))
    for c in sorted(takes - named):
        say(False, "%s --help names %s; the man page's OPTIONS entry of %s does not name %s" %
            (c, o, o, c))
for m in re.finditer(r"^  (-.*?)  +(\(.*)", ov_common, re.M):
    cmds = listed(m.group(2))
    for o in sorted(options(m.group(1)) if cmds else ()):
        takes = set(c for c in CMDS if o in helps[c])
        say(cmds == takes, "megacache --help gives %s to %s; the commands whose help names "
            "it are %s" % (o, ", ".join(sorted(cmds)), ", ".join(sorted(takes))))
EOF
[ $? = 0 ] || bad "the check of the options failed: $(tail -n 3 "$T/results")"
tally "$T/results"

finish
