"""tokenserver.py - the token service of a registry under test (CNCF distribution's
"auth: token:"), for tests/tool/registry.sh: GET /token?service=S&scope=repository:R:A
with HTTP Basic credentials answers a JWT, signed RS256 (by openssl) with the key whose
certificate the registry trusts (rootcertbundle) and is named in the header's x5c, that
grants the scope's actions; wrong or no credentials: 401. Each request is logged, one
line: the scope and whether it was granted (never a credential).

    python3 tokenserver.py PORT KEY CERT USER PASSWORD ISSUER LOG
Prints nothing; serves on 127.0.0.1:PORT until killed."""
import base64, json, subprocess, sys, time, urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

port, key, cert, user, password, issuer, log = sys.argv[1:8]


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def der_of(pem_path):
    text = open(pem_path).read()
    body = text.split("-----BEGIN CERTIFICATE-----")[1].split("-----END CERTIFICATE-----")[0]
    return base64.b64decode("".join(body.split()))


X5C = base64.b64encode(der_of(cert)).decode()


def token(service, scope):
    access = []
    if scope:
        kind, name, actions = scope.split(":", 2) if scope.count(":") >= 2 else ("", "", "")
        access.append({"type": kind, "name": name, "actions": actions.split(",")})
    now = int(time.time())
    head = {"typ": "JWT", "alg": "RS256", "x5c": [X5C]}
    claims = {"iss": issuer, "sub": user, "aud": service, "exp": now + 300, "nbf": now - 10,
              "iat": now, "jti": str(now) + scope, "access": access}
    signing = b64url(json.dumps(head).encode()) + "." + b64url(json.dumps(claims).encode())
    sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key], input=signing.encode(),
                         capture_output=True, check=True).stdout
    return signing + "." + b64url(sig)


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        q = urllib.parse.parse_qs(url.query)
        scope = q.get("scope", [""])[0]
        want = "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()
        granted = url.path == "/token" and self.headers.get("Authorization") == want
        with open(log, "a") as f:
            f.write("%s %s\n" % ("granted" if granted else "refused", scope))
        if not granted:
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = json.dumps({"token": token(q.get("service", [""])[0], scope),
                           "expires_in": 300}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", int(port)), Handler).serve_forever()
