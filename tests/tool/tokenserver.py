"""tokenserver.py - the token service of a registry under test (CNCF distribution's
"auth: token:"), for tests/tool/registry_lib.sh. It answers, at /token:
  GET ?service=S&scope=repository:R:A with HTTP Basic credentials of USER and the
      password: {"token", "access_token", "expires_in"};
  POST of grant_type=refresh_token&refresh_token=T&service=S&scope=... (docker's OAuth2
      flow for an identity token T): {"access_token", "expires_in"} only, as docker's
      token services answer it;
a JWT signed RS256 (by openssl) with the key whose certificate the registry trusts
(rootcertbundle) and that the header's x5c carries, granting the scopes' actions. Other
credentials: 401. Each request is logged, one line, never a credential:
  METHOD PATH VERDICT HOW SCOPE...   (VERDICT granted or refused; HOW basic, refresh or none)

    python3 tokenserver.py PORT KEY CERT USER SECRETS ISSUER LOG
SECRETS is a file: the password on its first line, the identity token on its second.
Prints nothing; serves on 127.0.0.1:PORT until killed."""
import base64, json, subprocess, sys, time, urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

port, key, cert, user, secrets, issuer, log = sys.argv[1:8]
password, refresh = open(secrets).read().split("\n")[:2]


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def der_of(pem_path):
    text = open(pem_path).read()
    body = text.split("-----BEGIN CERTIFICATE-----")[1].split("-----END CERTIFICATE-----")[0]
    return base64.b64decode("".join(body.split()))


X5C = base64.b64encode(der_of(cert)).decode()


def token(service, scopes):
    access = []
    for scope in scopes:
        if scope.count(":") >= 2:
            kind, rest = scope.split(":", 1)
            name, actions = rest.rsplit(":", 1)
            access.append({"type": kind, "name": name, "actions": actions.split(",")})
    now = int(time.time())
    head = {"typ": "JWT", "alg": "RS256", "x5c": [X5C]}
    claims = {"iss": issuer, "sub": user, "aud": service, "exp": now + 300, "nbf": now - 10,
              "iat": now, "jti": "%d-%s" % (now, " ".join(scopes)), "access": access}
    signing = b64url(json.dumps(head).encode()) + "." + b64url(json.dumps(claims).encode())
    sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key], input=signing.encode(),
                         capture_output=True, check=True).stdout
    return signing + "." + b64url(sig)


class Handler(BaseHTTPRequestHandler):
    def answer(self, how, granted, q, keys):
        scopes = q.get("scope", [])
        with open(log, "a") as f:
            f.write("%s %s %s %s %s\n" % (self.command, self.path.split("?")[0],
                                          "granted" if granted else "refused", how,
                                          " ".join(scopes)))
        if not granted:
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        t = token(q.get("service", [""])[0], scopes)
        body = json.dumps(dict({k: t for k in keys}, expires_in=300)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        q = urllib.parse.parse_qs(url.query)
        want = "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()
        got = self.headers.get("Authorization")
        self.answer("basic" if got else "none", url.path == "/token" and got == want, q,
                    ("token", "access_token"))

    def do_POST(self):
        url = urllib.parse.urlparse(self.path)
        n = int(self.headers.get("Content-Length") or 0)
        q = urllib.parse.parse_qs(self.rfile.read(n).decode())
        ok = (url.path == "/token" and q.get("grant_type") == ["refresh_token"]
              and q.get("refresh_token") == [refresh])
        self.answer("refresh", ok, q, ("access_token",))

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", int(port)), Handler).serve_forever()
