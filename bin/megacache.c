/*
 * megacache.c - the command-line tool: a thin layer over libmegacache that parses
 * arguments, prints results, and maps errors to exit codes (0 ok, 1 verification
 * failure, 2 usage or system error). Here: main, the usage text and the command table;
 * each command is in its cmd_<name>.c.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "tool.h"

const char tool_usage[] =
	"usage: megacache COMMAND [OPTIONS]\n"
	"       megacache COMMAND --help, megacache help COMMAND: that command's options\n"
	"\n"
	"Record PyTorch compile caches into one signed bundle, and warm caches from it.\n"
	"\n"
	"commands:\n"
	"  keygen -p PUBFILE -s SECFILE [-W] [-f] [--json]\n"
	"        make a key pair (minisign format); -W leaves the secret key unencrypted\n"
	"  save -o BUNDLE [-s SECFILE]... [--label K=V]... [--cache-dir DIR] [--triton-dir DIR]\n"
	"       [--keep-unknown] [--dry-run] [--json] [-v] (and pack's bundle options)\n"
	"        record everything torch and Triton left in the folders they use here (those\n"
	"        load installs into), saying which folders it read\n"
	"  run [-b BUNDLE]... [-p PUBFILE]... [--save-to OUT [-s SECFILE]... [--label K=V]...]\n"
	"      [--cache-dir DIR] [--triton-dir DIR] [--types T[,T]...] [--sync] [--allow-cold]\n"
	"      [--json | --json-file FILE] -- CMD [ARGS]...\n"
	"        verify and load the bundles, run CMD (--cache-dir and --triton-dir are\n"
	"        exported to it), pass on its exit status, say per type how many loaded\n"
	"        artifacts it read and how many it wrote anew, then save what it added to the\n"
	"        caches to OUT (not written when nothing is new); a bundle that fails to\n"
	"        verify stops the run unless --allow-cold\n"
	"  pack -o BUNDLE (--from-torch BLOB | --from-dir DIR | --from-triton-dir DIR)...\n"
	"       [-s SECFILE]... [--keep-unknown] [--label K=V]...\n"
	"       [--label-from-env VAR]... [--labels-json FILE]\n"
	"       [--bundle-version N] [--expires TIME] [--level N] [--no-compress]\n"
	"       [--format-version N] [--json] [-v]\n"
	"        record artifacts from torch blobs, cache dirs and Triton caches into a bundle\n"
	"        (without -s: unsigned, with a warning; --json: \"signed\")\n"
	"  sign BUNDLE -s SECFILE (-p PUBFILE... | --insecure-no-verify) [-o OUT] [--json]\n"
	"        verify a bundle as verify does, then add a signature to it (in place\n"
	"        unless -o)\n"
	"  verify BUNDLE... (-p PUBFILE... | --insecure-no-verify) [--threshold K]\n"
	"       [--min-version N] [--require K=V]... [--now TIME] [--json]\n"
	"        check signatures, policy and every byte of bundles, each told by name, the\n"
	"        worst status the exit status (2, then 3, then 1); tells each signature's\n"
	"        state: verified (by a trusted key), not checked (key not trusted) or broken\n"
	"        (a trusted key's, and it does not verify; --json: signatures); a\n"
	"        --threshold above the distinct keys given is refused (exit 2) before the\n"
	"        bundle is read\n"
	"  list BUNDLE [-p PUBFILE]... [--json] [--explain [--cache-dir DIR] [--triton-dir DIR]\n"
	"       [--gpu-target T]... [--skip-other-gpus]]\n"
	"        show a bundle's labels, GPU targets, signatures and artifacts (not\n"
	"        verified); -p: each signature's state under those keys, refusing nothing;\n"
	"        --explain: where each artifact would land, and whether a load here would\n"
	"        install it, replace a file that differs, leave an identical one unchanged,\n"
	"        leave a kernel for another GPU out, or refuse the bundle\n"
	"  load BUNDLE (-p PUBFILE... | --insecure-no-verify) [--cache-dir DIR]\n"
	"       [--triton-dir DIR] [--types T[,T]...] [--owner USER[:GROUP]] [--gpu-target T]...\n"
	"       [--skip-other-gpus] [--dry-run] [--sync] [--json]\n"
	"       [--threshold K] [--min-version N] [--require K=V]... [--now TIME]\n"
	"        verify a bundle and install its artifacts into the cache dirs; a bundle\n"
	"        holding Triton kernels for a GPU this host lacks is refused (exit 1,\n"
	"        gpu_mismatch) unless --skip-other-gpus leaves those kernels out; --sync:\n"
	"        flush them to disk before reporting success (one syncfs per filesystem);\n"
	"        --owner (root only): every file and folder the load makes is that user's\n"
	"        (USER alone: with its primary group; names or numbers); --dry-run also\n"
	"        checks the folders are there or could be made, and files made in them\n"
	"  export BUNDLE --torch OUTFILE [--torch-format 2.7|current]\n"
	"       (-p PUBFILE... | --insecure-no-verify) [--json]\n"
	"        verify the bundle and write its torch artifacts as a torch cache blob (torch\n"
	"        unpickles it: no -p needs --insecure-no-verify)\n"
	"  merge -o OUT BUNDLE... (-p PUBFILE... | --insecure-no-verify)\n"
	"       [-s SECFILE... | --unsigned] [--label K=V]... [--bundle-version N] [--level N]\n"
	"       [--expires TIME] [--json]\n"
	"        several bundles into one, contents stored once; for a (type, key) with\n"
	"        different contents the bundle given later wins (each conflict is reported);\n"
	"        keeps the inputs' highest bundle version unless --bundle-version, and their\n"
	"        earliest expiry unless --expires; labels the inputs do not all hold alike\n"
	"        are refused unless --label sets them; signed inputs without -s are refused\n"
	"        unless --unsigned\n"
	"  diff A B [--json]\n"
	"        artifacts added, removed and changed from A to B, per type, and the facts\n"
	"        that differ (format and bundle version, expiry, labels, signers); exit\n"
	"        status 0 when the same, 1 when they differ (as diff(1)), 2 on an error\n"
	"  push BUNDLE (-p PUBFILE... | --insecure-no-verify) [--redis URL] [--types T[,T]...]\n"
	"       [--ttl S] [--triton] [--dry-run] [--json]\n"
	"        verify, then write the bundle's FX graphs, AOTAutograd entries and PGO\n"
	"        states into torch's Redis remote cache (with --triton Triton's kernels into\n"
	"        Triton's); a second push changes nothing and says so\n"
	"  pull [--redis URL] -o BUNDLE [-s SECFILE]... [--match GLOB] [--triton] [--json]\n"
	"        those caches into a bundle, each entry checked for its form\n"
	"  audit [--redis URL] -p PUBFILE... BUNDLE... [--triton] [--json]\n"
	"        every entry of those caches no trusted bundle vouches for; exit 1 if any\n"
	"\n"
	"common options:\n"
	"  --password-file F  read the secret key's password from the first line of F;\n"
	"                     several: one per encrypted -s key, in order (the rest are\n"
	"                     asked on the terminal)\n"
	"  --expires TIME     (pack, save, run --save-to, merge, pull) a Unix time, an ISO\n"
	"                     8601 UTC time (2026-12-01, 2026-12-01T12:00:00Z) or +N[wdhms]\n"
	"                     from now (+2w, +30d, +12h); one not after now is refused\n"
	"  --now TIME         (verify, load, export, sign, merge, run, push, audit) check\n"
	"                     expiry as of this time, in the forms of --expires or -N[wdhms]\n"
	"                     before now (-1d, -30m)\n"
	"  --max-manifest-bytes N, --max-artifacts N, --max-artifact-bytes N,\n"
	"  --max-total-bytes N, --max-expansion N\n"
	"                     caps on what a bundle may declare (defaults 64 MiB, 1000000,\n"
	"                     8 GiB - 1, 256 GiB, and 4096 times an object's stored size;\n"
	"                     --max-expansion 0 turns that cap off)\n"
	"  --threads N        worker threads for pack, verify, load, push and pull (default\n"
	"                     0: one per CPU, at most 8); the bundle pack writes does not\n"
	"                     depend on it\n"
	"  --json             one JSON object on standard output, the report or\n"
	"                     {\"ok\": false, \"error\": CODE, ...} (doc/json-schema.json);\n"
	"                     run's at the end of standard error, from its last line\n"
	"                     that is a lone {, or in --json-file FILE\n"
	"  -q, --quiet        print nothing but errors\n"
	"  -v, --verbose      more detail: pack and save list each file recorded or\n"
	"                     skipped, load each artifact, run each new artifact saved,\n"
	"                     push, pull and audit each entry by its Redis key; accepted\n"
	"                     by the others, with no extra output\n"
	"  --progress WHEN    tty (the default: a line redrawn on a terminal), plain\n"
	"                     (\"verify: 25%\" lines every 5%, for CI logs; a load's\n"
	"                     \"verify\", then \"install\") or none\n"
	"  -p PUBFILE         a public key file, or the key itself: its base64 line\n"
	"                     (RW...), as minisign prints it, or the file's whole text\n"
	"  -h, --help         this text (after a command: its own help)\n"
	"  --version          the version; --version --json: with the bundle formats read\n"
	"                     and written, Redis support and the commands, as JSON\n"
	"\n"
	"The folders are torch's and Triton's: $TORCHINDUCTOR_CACHE_DIR, else\n"
	"<tmp>/torchinductor_<user>, <tmp> chosen as Python's tempfile.gettempdir() does\n"
	"($TMPDIR, $TEMP, $TMP, /tmp, /var/tmp, /usr/tmp, the working dir: the first that\n"
	"exists and is writable); Triton's kernels under torch in <that>/triton/<device>,\n"
	"Triton's own cache in $TRITON_CACHE_DIR, else $TRITON_HOME/.triton/cache\n"
	"(TRITON_HOME defaulting to the home folder); --triton-dir stands for\n"
	"$TRITON_CACHE_DIR, --cache-dir for $TORCHINDUCTOR_CACHE_DIR.\n"
	"SOURCE_DATE_EPOCH, when set, is the creation time pack records (reproducible bundles).\n"
	"The Redis of push, pull and audit without --redis is torch's: $TORCHINDUCTOR_REDIS_URL,\n"
	"else, when $TORCHINDUCTOR_REDIS_HOST or $TORCHINDUCTOR_REDIS_PORT is set,\n"
	"redis://HOST:PORT/0 (localhost, 6379 for the one unset); its password\n"
	"$MEGACACHE_REDIS_PASSWORD (below --redis-password-file, above the URL's).\n"
	"\n"
	"Pipes: BUNDLE - (load, verify, list, export, diff, merge, push, audit, run -b) reads\n"
	"standard input, in order and once, with every check of a file; nothing is installed\n"
	"unless all of it verified, and a stream cut short is refused whole (exit 1): curl\n"
	"-fsSL URL | megacache load - -p KEY. -o - (pack, save, sign, merge, pull) and --torch -\n"
	"(export) write to standard output, never to a terminal; the report then goes to\n"
	"standard error. Any other option naming a file refuses - (exit 2).\n"
	"\n"
	"exit status: 0 success; 1 verification or integrity failure; 2 usage or system error;\n"
	"3 a bundle of a newer format than this megacache reads (upgrade megacache);\n"
	"129, 130, 143: stopped by SIGHUP, SIGINT, SIGTERM (it ends by that signal), what it had\n"
	"staged or begun to write removed;\n"
	"run: the command's own (126/127: it could not be started, nothing loaded; killed by a\n"
	"signal: the same signal, or 128 + its number for one that dumps core).\n";

/* Each command's own help (megacache CMD --help, megacache help CMD): its usage, one line
 * per option, an example. The common options close every one (common_help). */
static const char keygen_help[] =
	"usage: megacache keygen -p PUBFILE -s SECFILE [-W] [-f] [--json]\n"
	"Make a key pair in minisign's format.\n"
	"  -p PUBFILE        where to write the public key\n"
	"  -s SECFILE        where to write the secret key (encrypted with a password); not\n"
	"                    PUBFILE, by any name\n"
	"  -W                leave the secret key unencrypted (no password)\n"
	"  -f, --force       replace keys that are already there\n"
	"  --json            the result as JSON\n"
	"  -v, --verbose     no extra output\n"
	"example: megacache keygen -p ci.pub -s ci.key\n";

static const char save_help[] =
	"usage: megacache save -o BUNDLE [-s SECFILE]... [--cache-dir DIR] [--triton-dir DIR]\n"
	"       [--dry-run] [--json] [pack's bundle options]\n"
	"Record everything torch and Triton left in the folders they use here.\n"
	"  -o, --output BUNDLE    the bundle to write (- : standard output)\n"
	"  -s SECFILE             sign with this key (several: one signature each)\n"
	"  --cache-dir DIR        torch's cache folder ($TORCHINDUCTOR_CACHE_DIR)\n"
	"  --triton-dir DIR       Triton's cache folder ($TRITON_CACHE_DIR)\n"
	"  --dry-run              say what would be recorded; write nothing\n"
	"  --json                 the report as JSON\n"
	"  --label K=V, --label-from-env VAR, --labels-json FILE, --bundle-version N,\n"
	"  --expires TIME, --level N, --no-compress, --format-version N, --keep-unknown:\n"
	"                         as pack\n"
	"  -v, --verbose          list each file skipped\n"
	"example: megacache save -o cache.mcache -s ci.key --label torch=2.11\n";

static const char run_help[] =
	"usage: megacache run [-b BUNDLE]... [-p PUBFILE]... [--save-to OUT [-s SECFILE]...]\n"
	"       [--cache-dir DIR] [--triton-dir DIR] [--types T[,T]...] [--sync] [--allow-cold]\n"
	"       [--gpu-target T]... [--skip-other-gpus] [--json | --json-file FILE] -- CMD [ARGS]...\n"
	"Load the bundles, run CMD with its exit status passed on, save what it added.\n"
	"After CMD, a line tells per type how many loaded artifacts it read and how many\n"
	"files it wrote anew (reads are told by access times, set to a mark before CMD:\n"
	"not on a noatime mount, nor of another user's files); a warning names the types\n"
	"it read none of (those read only to compile, once it read no FX graph either):\n"
	"likely a torch, Triton or config mismatch (megacache list BUNDLE shows the\n"
	"bundle's labels).\n"
	"  -b, --bundle BUNDLE    a bundle to verify and load first (several: in order)\n"
	"  -p PUBFILE             a trusted public key (a file, its text or its base64 line)\n"
	"  -o, --save-to OUT      save the artifacts CMD added to OUT (not written if none)\n"
	"  -s SECFILE             sign OUT with this key\n"
	"  --types T[,T]...       load only these artifact types\n"
	"  --cache-dir DIR, --triton-dir DIR   the cache folders (exported to CMD)\n"
	"  --sync                 flush what is loaded to disk before CMD starts\n"
	"  --allow-cold           run CMD even when a bundle fails to verify (or holds\n"
	"                         kernels for another GPU)\n"
	"  --gpu-target T, --skip-other-gpus   this host's GPU targets, and leaving out the\n"
	"                         kernels for others: as load\n"
	"  --json                 the report as JSON at the end of standard error, from its\n"
	"                         last line that is a lone { (standard output is CMD's)\n"
	"  --json-file FILE       the report as JSON, written to FILE instead\n"
	"  --threshold K, --min-version N, --require K=V, --now TIME, --insecure-no-verify:\n"
	"                         as verify\n"
	"  --label K=V, --label-from-env VAR, --labels-json FILE, --bundle-version N,\n"
	"  --expires TIME, --level N, --no-compress, --format-version N, --keep-unknown:\n"
	"                         as pack, for OUT\n"
	"  -v, --verbose          list every new artifact saved (else the first few)\n"
	"example: megacache run -b cache.mcache -p ci.pub --save-to new.mcache -s ci.key -- python train.py\n";

static const char push_help[] =
	"usage: megacache push BUNDLE (-p PUBFILE... | --insecure-no-verify) [--redis URL]\n"
	"       [--types T[,T]...] [--ttl S] [--triton] [--dry-run] [--json] [-v]\n"
	"Verify BUNDLE as load does and write its FX graphs, AOTAutograd entries and PGO\n"
	"states into torch's Redis remote cache (pt2:<cache id>::<key>:c1), each once its\n"
	"bytes checked; what the store had is compared: a second push changes nothing.\n"
	"torch's Redis holds one entry per FX graph or AOTAutograd key (the last is pushed),\n"
	"and torch keys AOTAutograd entries by TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE: push warns\n"
	"when the bundle's were not made with it set to 1, as workers with the remote caches\n"
	"on have it (save and run record it as a label).\n"
	"  --redis URL            redis://[[user]:password@]host[:port][/db] or\n"
	"                         unix:///path[?db=N] (default $TORCHINDUCTOR_REDIS_URL, else\n"
	"                         redis://$TORCHINDUCTOR_REDIS_HOST:$TORCHINDUCTOR_REDIS_PORT/0\n"
	"                         when either is set: localhost, 6379 for the one unset)\n"
	"  --redis-password-file F  the password (first line); else $MEGACACHE_REDIS_PASSWORD\n"
	"  -p PUBFILE             a trusted public key (a file, its text or its base64 line)\n"
	"  --threshold K, --min-version N, --require K=V, --now TIME, --insecure-no-verify:\n"
	"                         as verify\n"
	"  --types T[,T]...       push only these artifact types\n"
	"  --ttl S                the entries expire after S seconds (default: each keeps\n"
	"                         its TTL, a new one none); a TTL set anew is a change\n"
	"  --triton               Triton's kernels too, into Triton's remote cache\n"
	"  --triton-key-format F  its key format (default $TRITON_REDIS_KEY_FORMAT, else\n"
	"                         triton:{key}:{filename})\n"
	"  --dry-run              compare with the store; write nothing\n"
	"  --json                 the report as JSON\n"
	"  -v, --verbose          a line per artifact: written, replaced, unchanged\n"
	"                         or TTL changed (or, --dry-run, would be) with its\n"
	"                         Redis key, or not pushed (no remote form, shadowed)\n"
	"                         with its type and key\n"
	"example: megacache push cache.mcache -p ci.pub --redis redis://cache-host:6379/0\n";

static const char pull_help[] =
	"usage: megacache pull [--redis URL] -o BUNDLE [-s SECFILE]... [--match GLOB] [--triton]\n"
	"       [--label K=V]... [--json] [-v]\n"
	"Record every entry of torch's Redis remote cache (and with --triton Triton's) into\n"
	"BUNDLE: types and keys from the Redis keys, contents from the values, each checked\n"
	"for its form (others skipped, counted). Label redis=<URL> says where it came from;\n"
	"TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE=unknown, as the store does not record how its\n"
	"AOTAutograd entries were made (push warns): where only torch's workers with it 1\n"
	"write the store, pull with --label TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE=1.\n"
	"  --redis URL, --redis-password-file F, --triton, --triton-key-format F: as push\n"
	"  -o, --output BUNDLE    the bundle to write (- : standard output)\n"
	"  -s SECFILE             sign it with this key (several: co-sign)\n"
	"  --match GLOB           only keys matching this Redis glob (e.g. 'pt2:fx-graph-v1::*')\n"
	"  --label K=V, --label-from-env VAR, --labels-json FILE, --bundle-version N,\n"
	"  --expires TIME, --level N, --no-compress, --format-version N: as pack\n"
	"  --keep-unknown         taken; it changes nothing here (pull reads no folder)\n"
	"  --json                 the report as JSON\n"
	"  -v, --verbose          a line per entry: pulled, or skipped (odd form: not in\n"
	"                         the form of its key), with its Redis key\n"
	"example: megacache pull --redis redis://cache-host:6379/0 -o fleet.mcache -s ci.key\n";

static const char audit_help[] =
	"usage: megacache audit [--redis URL] -p PUBFILE... BUNDLE... [--triton] [--json] [-v]\n"
	"List every entry of torch's Redis remote cache (and with --triton Triton's) that no\n"
	"given trusted bundle vouches for: its key in none of them, other bytes than the\n"
	"signed manifest lists, or unreadable by torch (odd form: a value or key not in the\n"
	"form torch reads, the check pull skips them by). Exit status 1 when there is any.\n"
	"  --redis URL, --redis-password-file F, --triton, --triton-key-format F: as push\n"
	"  -p PUBFILE             a trusted public key; each BUNDLE must verify with them\n"
	"  --threshold K, --min-version N, --require K=V, --now TIME: as verify, for each\n"
	"                         BUNDLE (an unverified one vouches for nothing)\n"
	"  --json                 the findings as JSON\n"
	"  -v, --verbose          a line per entry checked: those vouched for too (without\n"
	"                         -v, a line per entry not vouched for)\n"
	"example: megacache audit --redis redis://cache-host:6379/0 -p ci.pub cache.mcache\n";

static const char pack_help[] =
	"usage: megacache pack -o BUNDLE (--from-torch BLOB | --from-dir DIR\n"
	"       | --from-triton-dir DIR)... [-s SECFILE]... [bundle options] [--json]\n"
	"Record artifacts from torch blobs, cache folders and Triton caches into a bundle.\n"
	"  -o, --output BUNDLE       the bundle to write (- : standard output)\n"
	"  -s SECFILE                sign with this key (none: unsigned, with a warning)\n"
	"  --from-torch BLOB         a blob of torch.compiler.save_cache_artifacts()\n"
	"  --from-dir DIR            a torch cache folder ($TORCHINDUCTOR_CACHE_DIR)\n"
	"  --from-triton-dir DIR     a Triton cache folder ($TRITON_CACHE_DIR)\n"
	"  --keep-unknown            record files of no known type too\n"
	"  --label K=V               a label (several; each key once)\n"
	"  --label-from-env VAR      a label VAR=its value from the environment\n"
	"  --labels-json FILE        labels from a JSON object (its string members)\n"
	"  --bundle-version N        the bundle's version (load and verify can ask a minimum)\n"
	"  --expires TIME            when the bundle stops verifying\n"
	"  --level N, --no-compress  zstd level (default 3), or none\n"
	"  --format-version N        bundle format 2 (the default) or 1, for readers\n"
	"                            older than format 2\n"
	"  --json                    the report as JSON\n"
	"  -v, --verbose             list each file skipped\n"
	"example: megacache pack -o cache.mcache -s ci.key --from-torch artifacts.bin\n";

static const char sign_help[] =
	"usage: megacache sign BUNDLE -s SECFILE (-p PUBFILE... | --insecure-no-verify) [-o OUT]\n"
	"       [--json]\n"
	"Verify a bundle as verify does, then add a signature to it (co-signing endorses\n"
	"it): a bundle that fails is not signed, exit 1, nothing written.\n"
	"  -s SECFILE            the key to sign with\n"
	"  -p PUBFILE            a trusted public key (a file, its text or its base64 line)\n"
	"  --threshold K, --min-version N, --require K=V, --now TIME   the policy, as verify's\n"
	"  --insecure-no-verify  sign without checking the signatures (warns)\n"
	"  -o, --output OUT      write the signed bundle to OUT (default: BUNDLE, in place;\n"
	"                        - : standard output)\n"
	"  --json                the result as JSON\n"
	"  -v, --verbose         no extra output\n"
	"example: megacache sign cache.mcache -s release.key -p ci.pub\n";

static const char verify_help[] =
	"usage: megacache verify BUNDLE... (-p PUBFILE... | --insecure-no-verify) [--threshold K]\n"
	"       [--min-version N] [--require K=V]... [--now TIME] [--json]\n"
	"Check a bundle's signatures, policy and every byte. Each signature is verified (by\n"
	"a trusted key), not checked (its key is not trusted: it vouches for nothing) or\n"
	"broken (by a trusted key id, and it does not verify: the verify fails). Several\n"
	"bundles (- once: standard input) are each checked and told; the exit status is the\n"
	"worst: 2 (one could not be checked), then 3 (a newer format), then 1, then 0.\n"
	"  -p PUBFILE            a trusted public key (a file, its text or its base64 line)\n"
	"  --threshold K         need K signatures by trusted keys (default 1)\n"
	"  --min-version N       refuse a bundle version below N\n"
	"  --require K=V         refuse a bundle without this label\n"
	"  --now TIME            check expiry as of TIME\n"
	"  --insecure-no-verify  check integrity only, no signatures\n"
	"  --json                the result as JSON\n"
	"  -v, --verbose         no extra output\n"
	"example: megacache verify cache.mcache -p ci.pub\n";

static const char list_help[] =
	"usage: megacache list BUNDLE [-p PUBFILE]... [--json]\n"
	"       [--explain [--cache-dir DIR] [--triton-dir DIR] [--gpu-target T]...\n"
	"       [--skip-other-gpus]]\n"
	"Show a bundle's labels, GPU targets, signatures and artifacts (not verified).\n"
	"  -p PUBFILE            check each signature against this key (a file, its text or\n"
	"                        its base64 line): verified, not checked or broken; nothing\n"
	"                        is refused\n"
	"  --explain             where each artifact would land, and what a load would do\n"
	"  --cache-dir DIR, --triton-dir DIR   the cache folders --explain looks at\n"
	"  --gpu-target T, --skip-other-gpus   the host's GPU targets and what to do with\n"
	"                        kernels for others, for --explain: as load\n"
	"  --json                the listing as JSON\n"
	"  -v, --verbose         no extra output\n"
	"example: megacache list cache.mcache --explain\n";

static const char load_help[] =
	"usage: megacache load BUNDLE (-p PUBFILE... | --insecure-no-verify) [--cache-dir DIR]\n"
	"       [--triton-dir DIR] [--types T[,T]...] [--owner USER[:GROUP]] [--gpu-target T]...\n"
	"       [--skip-other-gpus] [--dry-run] [--sync] [--json]\n"
	"       [--threshold K] [--min-version N] [--require K=V]... [--now TIME]\n"
	"Verify a bundle and install its artifacts into the cache folders (all or nothing).\n"
	"The bundle's Triton kernels are checked against this host's GPUs (NVML, AMD's KFD):\n"
	"one for a GPU target the host lacks refuses the bundle (exit 1, gpu_mismatch), with\n"
	"nothing installed. With no GPU seen, everything is installed, with a warning.\n"
	"  -p PUBFILE            a trusted public key (a file, its text or its base64 line)\n"
	"  --cache-dir DIR       torch's cache folder ($TORCHINDUCTOR_CACHE_DIR)\n"
	"  --triton-dir DIR      Triton's cache folder ($TRITON_CACHE_DIR)\n"
	"  --types T[,T]...      install only these artifact types\n"
	"  --owner USER[:GROUP]  (root only) make every file and folder that user's\n"
	"  --gpu-target T        this host's GPU target, as Triton names it: cuda:90 (compute\n"
	"                        capability 9.0), hip:gfx942 (several: each; instead of the\n"
	"                        GPUs detected; for image builds on a machine without them)\n"
	"  --skip-other-gpus     leave out the kernels for other targets (their whole\n"
	"                        folders) and install the rest\n"
	"  --dry-run             count what would be installed, as a load; install nothing\n"
	"  --sync                flush the files to disk before reporting success\n"
	"  --json                the report as JSON\n"
	"  --threshold K, --min-version N, --require K=V, --now TIME, --insecure-no-verify:\n"
	"                        as verify\n"
	"  -v, --verbose         a line per artifact: what was (or, --dry-run, would be)\n"
	"                        done, its type and key\n"
	"example: megacache load cache.mcache -p ci.pub\n";

static const char export_help[] =
	"usage: megacache export BUNDLE --torch OUTFILE [--torch-format 2.7|current]\n"
	"       (-p PUBFILE... | --insecure-no-verify) [--json]\n"
	"Verify a bundle and write its torch artifacts as a torch cache blob.\n"
	"  --torch OUTFILE       the blob to write (- : standard output)\n"
	"  --torch-format F      2.7 or current (default)\n"
	"  -p PUBFILE            a trusted public key (a file, its text or its base64 line)\n"
	"  --threshold K, --min-version N, --require K=V, --now TIME, --insecure-no-verify:\n"
	"                        as verify\n"
	"  --json                the result as JSON\n"
	"  -v, --verbose         no extra output\n"
	"example: megacache export cache.mcache --torch artifacts.bin -p ci.pub\n";

static const char merge_help[] =
	"usage: megacache merge -o OUT BUNDLE... (-p PUBFILE... | --insecure-no-verify)\n"
	"       [-s SECFILE... | --unsigned] [--label K=V]... [--bundle-version N] [--level N]\n"
	"       [--expires TIME] [--json]\n"
	"Merge bundles into one; for a (type, key) in several, the later bundle wins. A\n"
	"label the inputs do not all hold alike is refused (exit 2) unless --label sets it;\n"
	"OUT expires with the earliest of its inputs.\n"
	"  -o, --output OUT      the bundle to write (- : standard output)\n"
	"  -p PUBFILE            a trusted public key, to verify the inputs\n"
	"  -s SECFILE            sign OUT with this key\n"
	"  --unsigned            write OUT unsigned though its inputs are signed\n"
	"  --label K=V           a label (several, each key once): the merged value of one\n"
	"                        that differs\n"
	"  --expires TIME        OUT's expiry (default: the inputs' earliest)\n"
	"  --bundle-version N    OUT's version (default: the inputs' highest)\n"
	"  --level N             zstd level (default 3; 0: none)\n"
	"  --threshold K, --min-version N, --require K=V, --now TIME, --insecure-no-verify:\n"
	"                        as verify, for each input\n"
	"  --json                the result as JSON\n"
	"  -v, --verbose         no extra output\n"
	"example: megacache merge -o all.mcache a.mcache b.mcache -p ci.pub -s ci.key\n";

static const char diff_help[] =
	"usage: megacache diff A B [--json]\n"
	"Artifacts added, removed and changed from bundle A to B, and the facts that differ:\n"
	"format and bundle version, expiry, labels, signers (exit 0 same, 1 differ).\n"
	"  --json                the differences as JSON\n"
	"  -v, --verbose         no extra output\n"
	"example: megacache diff old.mcache new.mcache\n";

static const char common_help[] =
	"common options (every command):\n"
	"  -q, --quiet           print nothing but errors\n"
	"  --progress WHEN       tty (default: on a terminal), plain (lines, for logs), none\n"
	"  --password-file F     a secret key's password (several: one per encrypted key)\n"
	"  --threads N           worker threads (default 0: one per CPU, at most 8)\n"
	"  --max-manifest-bytes N, --max-artifacts N, --max-artifact-bytes N,\n"
	"  --max-total-bytes N, --max-expansion N   caps on what a bundle may declare\n"
	"  -h, --help            this text; megacache --help: all commands\n";

/* The commands. Every one takes the common options and runs on a context with progress,
 * threads and caps (tool_start); the flags name the set-up it needs beyond that, and
 * writing the word its progress gives the writing of a bundle (NULL: "pack"). */
static const struct command {
	const char *name;
	tool_cmd_fn *fn;
	unsigned flags;
	const char *help;
	const char *writing;
} commands[] = {
	{"keygen", cmd_keygen, TOOL_JSON, keygen_help, NULL},
	{"pack", cmd_pack, TOOL_JSON, pack_help, NULL},
	{"sign", cmd_sign, TOOL_TRUST | TOOL_JSON, sign_help, NULL},
	{"verify", cmd_verify, TOOL_TRUST | TOOL_JSON, verify_help, NULL},
	{"list", cmd_list, TOOL_TIERS | TOOL_JSON, list_help, NULL},
	{"load", cmd_load, TOOL_TRUST | TOOL_TIERS | TOOL_JSON, load_help, NULL},
	{"export", cmd_export, TOOL_TRUST | TOOL_JSON, export_help, NULL},
	{"merge", cmd_merge, TOOL_TRUST | TOOL_JSON, merge_help, "merge"},
	{"diff", cmd_diff, TOOL_JSON, diff_help, NULL},
	{"save", cmd_save, TOOL_TIERS | TOOL_JSON, save_help, "save"},
	{"run", cmd_run, TOOL_TRUST | TOOL_TIERS, run_help, "save"},
	{"push", cmd_push, TOOL_TRUST | TOOL_JSON, push_help, NULL},
	{"pull", cmd_pull, TOOL_JSON, pull_help, NULL},
	{"audit", cmd_audit, TOOL_TRUST | TOOL_JSON, audit_help, NULL},
};

/* Whether --json (or a prefix getopt takes for it: --j, --js, --jso; or --json=ARG) is
 * among argv[1..] (before a "--"), seen before the options are parsed so that a usage
 * error is told in JSON too, whatever it is. */
static int
json_asked(int argc, char **argv)
{
	size_t n;
	int i;

	for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (((n = strlen(argv[i])) >= 3 && n <= 6 && strncmp(argv[i], "--json", n) == 0) ||
		    strncmp(argv[i], "--json=", 7) == 0)
			return 1;
	return 0;
}

/* The same among the options of cmd, when it takes --json. */
static int
wants_json(const struct command *cmd, int argc, char **argv)
{
	return (cmd->flags & TOOL_JSON) && json_asked(argc, argv);
}

/* Runs cmd on argv (argv[0] its name), with its own option state, and frees what it set up. */
static int
run_command(const struct command *cmd, int argc, char **argv)
{
	struct tool t;
	char name[64];
	int rc;

	memset(&t, 0, sizeof t);
	t.name = cmd->name;
	t.flags = cmd->flags;
	t.progress.writing = cmd->writing;
	/* The name getopt's complaints start with (options.c). */
	snprintf(name, sizeof name, "megacache %s", cmd->name);
	argv[0] = name;
	tool_command = cmd->name;
	if (wants_json(cmd, argc, argv))
		json_begin(cmd->name);
	rc = cmd->fn(&t, argc, argv);
	interrupt_watch(NULL);
	mc_ctx_free(t.ctx);
	return json_finish(rc);
}

/* The command named name, or NULL. */
static const struct command *
find_command(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof commands / sizeof commands[0]; i++)
		if (strcmp(name, commands[i].name) == 0)
			return &commands[i];
	return NULL;
}

/* Prints the help of the command named name (NULL or unknown: the overview) to stdout. */
void
tool_help(const char *name)
{
	const struct command *cmd = name != NULL ? find_command(name) : NULL;

	if (cmd == NULL) {
		fputs(tool_usage, stdout);
		return;
	}
	fputs(cmd->help, stdout);
	fputs(common_help, stdout);
}

/* megacache help [CMD]: the overview, or CMD's help. */
static int
help_command(int argc, char **argv)
{
	if (argc > 2 && find_command(argv[2]) == NULL) {
		if (json_asked(argc, argv))
			json_begin("");
		say(stderr, "%s: unknown command '%s'", PROG, argv[2]);
		try_help();
	}
	tool_help(argc > 2 ? argv[2] : NULL);
	return 0;
}

/* megacache --version [--json]: the versions of the tool, its library and the bundle
 * formats; --json: an object with what a pipeline checks before it counts on this
 * megacache (the formats it reads and writes, Redis support, the commands). */
static int
version_command(int argc, char **argv)
{
	cJSON *j, *f, *a;
	size_t i;
	int v;

	if (argc > 3 || (argc == 3 && strcmp(argv[2], "--json") != 0)) {
		say(stderr, "%s: --version takes no option but --json", PROG);
		try_help();
	}
	if (argc == 2) {
		say(stdout, "megacache %s (bundle format %d)", MC_VERSION_STRING, MC_FORMAT_VERSION);
		return 0;
	}
	json_begin("version");
	j = json_object();
	cJSON_AddStringToObject(j, "version", MC_VERSION_STRING);
	cJSON_AddStringToObject(j, "library_version", mc_version());
	f = cJSON_AddObjectToObject(j, "format_versions");
	a = cJSON_AddArrayToObject(f, "read");
	for (v = 1; v <= MC_FORMAT_VERSION; v++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber(v));
	a = cJSON_AddArrayToObject(f, "write"); /* mc_writer_set_format_version(): 1 or the default */
	cJSON_AddItemToArray(a, cJSON_CreateNumber(1));
	if (MC_FORMAT_VERSION > 1)
		cJSON_AddItemToArray(a, cJSON_CreateNumber(MC_FORMAT_VERSION));
	cJSON_AddNumberToObject(f, "default", MC_FORMAT_VERSION);
	a = cJSON_AddArrayToObject(j, "torch_formats");
	cJSON_AddItemToArray(a, cJSON_CreateString("2.7"));
	cJSON_AddItemToArray(a, cJSON_CreateString("current"));
	cJSON_AddBoolToObject(j, "redis", mc_redis_supported() != 0);
	a = cJSON_AddArrayToObject(j, "commands");
	for (i = 0; i < sizeof commands / sizeof commands[0]; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(commands[i].name));
	print_json(j);
	return 0;
}

/* What a command printed is part of its result: output that could not all be written (a
 * full disk, a pipe closed with SIGPIPE ignored) fails it, exit 2, as a failed write of a
 * bundle does. Returns rc, or 2 then. */
static int
flush_stdout(int rc)
{
	int lost = ferror(stdout);

	errno = 0;
	if (fflush(stdout) == 0 && !lost)
		return rc;
	say(stderr, "%s: cannot write standard output%s%s", PROG, errno != 0 ? ": " : "",
	    errno != 0 ? strerror(errno) : "");
	return rc == 0 ? EXIT_USAGE : rc;
}

int
main(int argc, char **argv)
{
	const struct command *cmd;

	/* A file-size limit must give a clear error (EFBIG), not kill the process. */
	signal(SIGXFSZ, SIG_IGN);
	interrupt_catch();
	if (argc < 2) {
		fputs(tool_usage, stderr);
		return EXIT_USAGE;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "help") == 0)
		return flush_stdout(help_command(argc, argv));
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)
		return flush_stdout(version_command(argc, argv));
	if ((cmd = find_command(argv[1])) != NULL) {
		int rc = run_command(cmd, argc - 1, argv + 1);
		return flush_stdout(interrupt_end(rc));
	}
	/* No command: with --json, the failure object names none ("command": ""). */
	if (json_asked(argc, argv))
		json_begin("");
	if (argv[1][0] == '-')
		say(stderr, "%s: no command given: megacache COMMAND [OPTIONS], not '%s' first", PROG,
		    argv[1]);
	else
		say(stderr, "%s: unknown command '%s'", PROG, argv[1]);
	try_help();
}
