"""python -m megacache: the commands of the megacache tool, for machines that have the
library and this package but not the command (keygen, save, load, verify, list, export,
run), with their main options. Exit statuses are the tool's: 0 success, 1 the bundle
failed verification, 2 any other error; run passes on the command's. --json prints the
package's reports (to_dict()), not the tool's JSON, with the tool's names where they say
the same (artifact_count a number, artifacts an array)."""

import argparse
import dataclasses
import functools
import json
import os
import signal
import subprocess
import sys

import megacache

EXIT_VERIFY = 1
EXIT_USAGE = 2
EXIT_VERSION = 3  # the bundle needs a newer megacache


def _say(msg, stream=sys.stdout):
    print(msg, file=stream, flush=True)


def _json(obj):
    print(json.dumps(obj, indent=2, ensure_ascii=False))


def _mb(n):
    return "%.2f MB" % (n / 1e6) if n >= 1e6 else "%d B" % n


def _password(args):
    """The first line of --password-file, else None (asked on the terminal)."""
    if not getattr(args, "password_file", None):
        return None
    with open(args.password_file, "rb") as f:
        return f.readline().rstrip(b"\r\n")


def _trust(p):
    p.add_argument("-p", "--pubkey", action="append", default=[], metavar="PUBFILE",
                   help="a trusted public key (file or base64); repeat for several")
    p.add_argument("--threshold", type=int, default=1, metavar="K",
                   help="valid signatures needed by distinct trusted keys (default 1)")
    p.add_argument("--min-version", type=int, default=0, metavar="N",
                   help="refuse bundles whose version is below N")
    p.add_argument("--require", action="append", default=[], metavar="K=V",
                   help="a label the bundle must carry; repeat for several")


def _tiers(p):
    p.add_argument("--cache-dir", metavar="DIR", help="torch's cache dir (an inductor root)")
    p.add_argument("--triton-dir", metavar="DIR", help="Triton's cache dir")


def _signing(p):
    p.add_argument("-s", "--secret-key", action="append", default=[], metavar="SECFILE",
                   help="sign with this secret key; repeat for several")
    p.add_argument("--label", action="append", default=[], metavar="K=V",
                   help="a label for the bundle; repeat for several")
    p.add_argument("--password-file", metavar="FILE",
                   help="the secret key's password: the first line of FILE")


def _parser():
    top = argparse.ArgumentParser(
        prog="python -m megacache", allow_abbrev=False,
        description="Record PyTorch compile caches into one signed bundle, and warm caches "
                    "from it. Exit status: 0 success, 1 the bundle failed verification, "
                    "2 any other error, 3 the bundle needs a newer megacache.")
    top.add_argument("--version", action="version",
                     version="megacache (Python) %s" % megacache.__version__)
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # Options by their whole names only: argparse would take any unambiguous start of
    # one (--pub for --pubkey), a trap in scripts.
    add = functools.partial(sub.add_parser, allow_abbrev=False)

    p = add("keygen", help="make a key pair (minisign format)")
    p.add_argument("-p", "--pubkey", required=True, metavar="PUBFILE")
    p.add_argument("-s", "--secret-key", required=True, metavar="SECFILE")
    p.add_argument("-W", dest="unencrypted", action="store_true",
                   help="leave the secret key unencrypted")
    p.add_argument("-f", dest="force", action="store_true", help="replace existing files")
    p.add_argument("--password-file", metavar="FILE")

    p = add("save", help="record the folders torch and Triton use into a bundle")
    p.add_argument("-o", "--output", required=True, metavar="BUNDLE")
    _signing(p)
    _tiers(p)
    p.add_argument("--keep-unknown", action="store_true",
                   help="record unknown files as type extra")
    p.add_argument("--dry-run", action="store_true", help="write nothing")
    p.add_argument("--json", action="store_true")
    p.add_argument("-v", "--verbose", action="store_true", help="name each skipped file")

    p = add("load", help="verify a bundle and install it into the cache dirs")
    p.add_argument("bundle", metavar="BUNDLE")
    _trust(p)
    _tiers(p)
    p.add_argument("--types", metavar="T[,T]...", help="install only these types")
    p.add_argument("--gpu-target", action="append", metavar="T",
                   help="this host's GPU target, cuda:90 or hip:gfx942 (repeatable; instead "
                        "of the GPUs detected)")
    p.add_argument("--skip-other-gpus", action="store_true",
                   help="leave out the kernels for GPU targets the host lacks")
    p.add_argument("--dry-run", action="store_true", help="verify and report, write nothing")
    p.add_argument("--sync", action="store_true", help="flush the files to disk first")
    p.add_argument("--json", action="store_true")

    p = add("verify", help="check signatures, policy and every byte of a bundle")
    p.add_argument("bundle", metavar="BUNDLE")
    _trust(p)
    p.add_argument("--json", action="store_true")

    p = add("list", help="show a bundle's labels, signatures and artifacts "
                                    "(not verified)")
    p.add_argument("bundle", metavar="BUNDLE")
    p.add_argument("-p", "--pubkey", action="append", metavar="PUBFILE",
                   help="check each signature against this key (repeatable); nothing is "
                        "refused")
    p.add_argument("--json", action="store_true")

    p = add("export", help="write a bundle's torch artifacts as a torch blob")
    p.add_argument("bundle", metavar="BUNDLE")
    p.add_argument("--torch", required=True, metavar="OUTFILE")
    p.add_argument("--torch-format", default="current", choices=["current", "2.7"])
    _trust(p)

    p = add("run", help="load bundles, run a command, save what it added")
    p.add_argument("-b", "--bundle", action="append", default=[], metavar="BUNDLE")
    _trust(p)
    p.add_argument("--save-to", metavar="OUT")
    _signing(p)
    _tiers(p)
    p.add_argument("--types", metavar="T[,T]...")
    p.add_argument("--sync", action="store_true")
    p.add_argument("--allow-cold", action="store_true",
                   help="go on without a bundle that is missing or fails to verify")
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD [ARGS]...")
    return top


def cmd_keygen(a):
    pw = None
    if not a.unencrypted:
        pw = _password(a)
        if pw is None:
            import getpass
            if not sys.stdin.isatty():
                raise megacache.UsageError(
                    "%s: no password given: there is no terminal to ask it on; use "
                    "--password-file, or -W for an unencrypted key" % a.secret_key)
            pw = getpass.getpass("password for the new secret key: ")
            if getpass.getpass("again: ") != pw:
                raise megacache.UsageError("the passwords differ")
    kid = megacache.keygen(a.pubkey, a.secret_key, pw, overwrite=a.force)
    _say("key %s: public key %s, secret key %s" % (kid, a.pubkey, a.secret_key))


def _skip_printer(a):
    if not a.verbose:
        return None
    return lambda rel, why: _say("skipped %s: %s" % (rel, why), sys.stderr)


def cmd_save(a):
    r = megacache.save(a.output, a.secret_key or None, cache_dir=a.cache_dir,
                       triton_dir=a.triton_dir, labels=a.label, keep_unknown=a.keep_unknown,
                       password=_password(a), dry_run=a.dry_run, on_skip=_skip_printer(a))
    if a.json:
        _json(r.to_dict())
        return
    for f in r.folders:
        _say("%s: %s" % (f.path, "%d artifacts" % f.artifact_count if f.exists else "no folder"))
    verb = "would save" if r.dry_run else "saved"
    _say("%s %d artifacts (%s) into %s, %d signatures" % (verb, r.artifact_count, _mb(r.bytes),
                                                          r.bundle, r.signatures))


def cmd_load(a):
    r = megacache.load(a.bundle, a.pubkey, cache_dir=a.cache_dir, triton_dir=a.triton_dir,
                       types=a.types, require=a.require, threshold=a.threshold,
                       min_version=a.min_version, dry_run=a.dry_run, sync=a.sync,
                       gpu_targets=a.gpu_target, skip_other_gpus=a.skip_other_gpus)
    if a.json:
        _json(r.to_dict())
        return
    if r.skipped:
        _say("left out %d files of kernels for GPU targets this host lacks (this host: %s)"
             % (r.skipped, ", ".join(r.host_gpu_targets)))
    if r.dry_run:
        _say("would install %d artifacts, replace %d (%s), %d already there"
             % (r.would_install, r.would_replace, _mb(r.bytes), r.unchanged))
        return
    _say("loaded %d artifacts, replaced %d (%s), %d already there"
         % (r.installed, r.replaced, _mb(r.bytes), r.unchanged))
    used = sorted({x.dest for x in r.artifacts})
    for tier, root in r.roots.items():
        if root and any(d.startswith(root.rstrip("/") + "/") for d in used):
            _say("  %s: %s" % (tier, root))


def cmd_verify(a):
    try:
        info = megacache.verify(a.bundle, a.pubkey, threshold=a.threshold,
                                min_version=a.min_version, require=a.require)
    except megacache.Error as e:
        if a.json:
            _json({"bundle": a.bundle, "ok": False, "error": e.name, "message": e.message})
        raise
    if a.json:
        _json({"bundle": a.bundle, "ok": True, "artifact_count": len(info.artifacts),
               "bundle_version": info.bundle_version,
               "signatures": [dataclasses.asdict(x) for x in info.signatures]})
    else:
        _say("%s: OK, %d artifacts, signatures: %s" % (a.bundle, len(info.artifacts),
                                                      _signatures(info)))


_STATE_TEXT = {"verified": "verified", "broken": "broken",
               "not_checked": "not checked"}


def _signatures(info):
    """ "ID (verified), ID (not checked)", or "none". """
    return ", ".join("%s (%s)" % (x.key_id, _STATE_TEXT.get(x.state, x.state))
                     for x in info.signatures) or "none"


def cmd_list(a):
    info = megacache.list(a.bundle, a.pubkey)
    if a.json:
        _json(info.to_dict())
        return
    _say("%s (not verified): version %d, %d artifacts, signatures: %s" % (
        a.bundle, info.bundle_version, len(info.artifacts), _signatures(info)))
    for k, v in info.labels.items():
        _say("  label %s=%s" % (k, v))
    for x in info.artifacts:
        _say("  %-12s %10d  %s" % (x.type, x.size, x.key))


def cmd_export(a):
    data = megacache.torch_artifacts(a.bundle, a.pubkey, threshold=a.threshold,
                                     min_version=a.min_version, require=a.require,
                                     torch_format=a.torch_format)
    tmp = a.torch + ".tmp%d" % os.getpid()
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, a.torch)
    _say("wrote %s (%s)" % (a.torch, _mb(len(data))))


# Signals whose default action dumps core: a command killed by one is reported as the
# shell would (128 + n) instead of being raised here again.
CORE_SIGNALS = {signal.SIGQUIT, signal.SIGILL, signal.SIGABRT, signal.SIGFPE, signal.SIGSEGV,
                signal.SIGBUS, signal.SIGTRAP, signal.SIGSYS, signal.SIGXCPU, signal.SIGXFSZ}


def _run_child(cmd):
    """Runs cmd; its wait status as subprocess gives it (-n: killed by signal n).

    As a shell does for a job in the foreground, SIGINT and SIGQUIT are ignored here
    while it runs (a terminal sends them to the command too); SIGHUP, SIGTERM, SIGUSR1
    and SIGUSR2 are passed on to it."""
    try:
        child = subprocess.Popen(cmd)
    except FileNotFoundError:
        _say("megacache: %s: command not found" % cmd[0], sys.stderr)
        return 127
    except PermissionError:
        _say("megacache: %s: cannot run" % cmd[0], sys.stderr)
        return 126
    handlers = {signal.SIGINT: signal.SIG_IGN, signal.SIGQUIT: signal.SIG_IGN}
    for n in (signal.SIGHUP, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2):
        handlers[n] = lambda n, f: child.send_signal(n)
    old = {n: signal.signal(n, h) for n, h in handlers.items()}
    try:
        return child.wait()
    finally:
        for n, h in old.items():
            signal.signal(n, h)


def _exit_as(status):
    """The exit status for the command's wait status: its own, or its signal raised
    here again (128 + n for a signal that dumps core)."""
    if status >= 0:
        return status
    n = -status
    if n not in CORE_SIGNALS:
        signal.signal(n, signal.SIG_DFL)
        os.kill(os.getpid(), n)
    return 128 + n


def cmd_run(a):
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        raise megacache.UsageError("run needs -- CMD [ARGS]...")
    if a.bundle and not a.pubkey:
        raise megacache.UsageError("run needs -p PUBFILE to verify the bundles")
    if a.save_to is None and a.secret_key:
        raise megacache.UsageError("-s is for --save-to")
    status = None
    try:
        with megacache.warm(a.bundle, a.pubkey or None, save_to=a.save_to,
                            secret_key=a.secret_key or None, cache_dir=a.cache_dir,
                            triton_dir=a.triton_dir, types=a.types, allow_cold=a.allow_cold,
                            labels=a.label, password=_password(a), sync=a.sync) as w:
            for path, why in w.cold:
                _say("megacache: going on cold without %s: %s" % (path, why), sys.stderr)
            for r in w.loaded:
                n = r.installed + r.replaced + r.unchanged
                _say("megacache: loaded %d artifacts from %s" % (n, r.bundle), sys.stderr)
            status = _run_child(cmd)
    except megacache.Error as e:
        if status is None or status == 0:
            raise
        # The command failed: its status is what the caller acts on.
        _say("megacache: %s" % e.message, sys.stderr)
        return _exit_as(status)
    if w.saved is not None:
        _say("megacache: saved %d new artifacts to %s" % (w.saved.artifact_count, w.saved.bundle),
             sys.stderr)
    elif a.save_to is not None:
        _say("megacache: nothing new; %s not written" % a.save_to, sys.stderr)
    return _exit_as(status)


COMMANDS = {"keygen": cmd_keygen, "save": cmd_save, "load": cmd_load, "verify": cmd_verify,
            "list": cmd_list, "export": cmd_export, "run": cmd_run}


def main(argv=None):
    a = _parser().parse_args(argv)
    try:
        return COMMANDS[a.command](a) or 0
    except megacache.UnsupportedVersionError as e:
        _say("megacache: %s" % e.message, sys.stderr)
        return EXIT_VERSION
    except megacache.VerificationError as e:
        _say("megacache: %s" % e.message, sys.stderr)
        return EXIT_VERIFY
    except megacache.Error as e:
        _say("megacache: %s" % e.message, sys.stderr)
        return EXIT_USAGE
    except OSError as e:
        _say("megacache: %s" % e, sys.stderr)
        return EXIT_USAGE
    except Exception:  # noqa: B902 - a defect here is not a verdict on a bundle
        import traceback
        traceback.print_exc()
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
