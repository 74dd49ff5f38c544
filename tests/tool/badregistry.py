"""badregistry.py - a registry that misbehaves, for tests/tool/badregistry.sh: it serves
the distribution API (GET and HEAD of /v2/, manifests and blobs) for two genuine bundles
A and B, and the repository's name picks how it goes wrong:

  good           the control: A, as a registry serves it
  bigmanifest    a manifest of 64 MiB (the client must stop reading at its cap)
  longlayer      the layer is A with bytes after it, the descriptor A's size
  shortlayer     the descriptor says 10 bytes more than the layer has
  wrongdigest    A's bytes and size, the descriptor naming other content
  corrupt        A's descriptor, A's bytes with one flipped in the middle
  manifestdigest by digest: a manifest whose SHA-256 is not the one asked for
  mediatype      a docker v2 manifest
  artifacttype   an OCI manifest of another artifact type
  twolayers      A's layer twice
  index          an OCI image index
  redirectloop   the blob answers 307 to itself, forever
  redirectok     the blob answers 307 to /storage/..., which serves it; whether an
                 Authorization header came there is logged
  longredirect   as redirectok, to a 3,100-byte /storage/<padding>/<digest>; only
                 a path ending in the blob's digest is served
  hugeredirect   as longredirect, the Location 9,000 bytes long
  unauthloop     every request is 401, the realm's token refused again
  badtoken       every request is 401, the realm's token a line break and a header
  stall          the blob's headers, half its bytes, then nothing
  stallheaders   the blob request is taken, then nothing
  truncated      Content-Length of the whole blob, the connection closed at half
  movingtag      the tag names A for the first manifest read, B after; blobs by digest

    python3 badregistry.py A B PORTFILE LOG
Writes the port it listens on (127.0.0.1) to PORTFILE; logs one line per request."""
import hashlib, json, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

A, B = (open(p, "rb").read() for p in sys.argv[1:3])
portfile, logfile = sys.argv[3:5]
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
BUNDLE = "application/vnd.megacache.bundle.v2"
EMPTY = "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
lock = threading.Lock()
seen = {}


def digest(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def manifest(bundle, mode="good"):
    layer = {"mediaType": BUNDLE, "digest": digest(bundle), "size": len(bundle)}
    m = {"schemaVersion": 2, "mediaType": MANIFEST, "artifactType": BUNDLE,
         "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": EMPTY, "size": 2},
         "layers": [layer], "annotations": {}}
    if mode == "shortlayer":
        layer["size"] += 10
    elif mode == "wrongdigest":
        layer["digest"] = digest(bundle + b"x")
    elif mode == "mediatype":
        m["mediaType"] = "application/vnd.docker.distribution.manifest.v2+json"
        del m["artifactType"]
    elif mode == "artifacttype":
        m["artifactType"] = "application/vnd.cncf.helm.config.v1+json"
    elif mode == "twolayers":
        m["layers"] = [layer, layer]
    elif mode == "index":
        m = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
             "manifests": [{"mediaType": MANIFEST, "digest": digest(b"{}"), "size": 2}]}
    elif mode == "bigmanifest":
        m["annotations"]["pad"] = "x" * (64 << 20)
    return json.dumps(m).encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log(self, what):
        with lock, open(logfile, "a") as f:
            f.write("%s %s %s auth=%s\n" % (self.command, self.path, what,
                                            "yes" if self.headers.get("Authorization") else "no"))

    def answer(self, status, body=b"", ctype="application/octet-stream", headers=(), length=None):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            try:
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                self.log("client went away")

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        parts = self.path.split("?")[0].split("/")
        self.log("")
        if self.path.startswith("/storage/"):
            if not self.path.endswith(digest(A)):
                return self.answer(404, b"{}", "application/json")
            return self.answer(200, A)
        if self.path.startswith("/token/crlf"):
            return self.answer(200, b'{"token": "t\\r\\nX-Injected: yes"}', "application/json")
        if self.path.startswith("/token"):
            return self.answer(200, b'{"token": "refused-anyway"}', "application/json")
        if parts[:2] != ["", "v2"] or len(parts) < 5:
            return self.answer(200, b"{}", "application/json")
        mode, kind, ref = parts[2], parts[3], parts[4]
        if mode in ("unauthloop", "badtoken"):
            realm = 'Bearer realm="http://127.0.0.1:%d/token%s",service="bad",scope="x"' % (
                self.server.server_port, "/crlf" if mode == "badtoken" else "")
            return self.answer(401, b"{}", "application/json", [("WWW-Authenticate", realm)])
        if kind == "manifests":
            return self.manifests(mode, ref)
        return self.blobs(mode, ref)

    def manifests(self, mode, ref):
        bundle = A
        if mode == "movingtag":
            with lock:
                seen[mode] = seen.get(mode, 0) + 1
                bundle = A if seen[mode] == 1 else B
        body = manifest(bundle, mode)
        if mode == "manifestdigest":
            body = manifest(B)
        ctype = json.loads(body).get("mediaType", MANIFEST) if mode != "bigmanifest" else MANIFEST
        self.answer(200, body, ctype, [("Docker-Content-Digest", digest(body))]
                    if mode != "manifestdigest" else [])

    def blobs(self, mode, ref):
        if ref == EMPTY:
            return self.answer(200, b"{}")
        data = {digest(A): A, digest(B): B}.get(ref)
        if mode in ("shortlayer", "wrongdigest"):
            data = A
        if mode == "corrupt" and data is A:
            data = bytearray(A)
            data[len(A) // 2] ^= 1
            data = bytes(data)
        if data is None:
            return self.answer(404, b'{"errors": [{"code": "BLOB_UNKNOWN", "message": "blob unknown"}]}',
                               "application/json")
        if mode == "longlayer":
            return self.answer(200, data + b"trailing bytes")
        if mode == "redirectloop":
            return self.answer(307, headers=[("Location", self.path)])
        if mode == "redirectok":
            return self.answer(307, headers=[("Location", "/storage/" + ref)])
        if mode in ("longredirect", "hugeredirect"):
            pad = "p" * (3000 if mode == "longredirect" else 9000)
            return self.answer(307, headers=[("Location", "/storage/%s/%s" % (pad, ref))])
        if mode in ("stall", "truncated"):
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            if mode == "stall":
                time.sleep(30)
            self.close_connection = True
            return
        if mode == "stallheaders":
            time.sleep(30)
            self.close_connection = True
            return
        self.answer(200, data)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
with open(portfile, "w") as f:
    f.write(str(server.server_port))
server.serve_forever()
