# registry_lib.sh - a real OCI registry for the tool tests, sourced after lib.sh: CNCF
# distribution (Debian's docker-registry) serving $T/NAME on a free port, in one of three
# modes:
#   plain  plain HTTP, anonymous
#   basic  TLS with a CA made here, htpasswd Basic auth of $REG_USER / $REG_PASSWORD
#   token  TLS with that CA, the Bearer token flow: tests/tool/tokenserver.py grants
#          $REG_USER / $REG_PASSWORD (or the identity token $REG_REFRESH) what they ask
# Each server is waited for (FAIL when it does not answer within 10 s) and killed when
# the test exits. A missing tool makes the test a SKIP (exit 77).
REG_PY=/usr/bin/python3
REG_PIDS=""
REG_USER=${REG_USER:-alice}
REG_PASSWORD=${REG_PASSWORD:-"pw-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"}
REG_REFRESH=${REG_REFRESH:-"rt-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"}

registry_stop_all() {
	for p in $REG_PIDS; do
		kill "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	REG_PIDS=""
}
trap registry_stop_all EXIT

for _tool in docker-registry skopeo openssl htpasswd curl "$REG_PY"; do
	command -v "$_tool" >/dev/null 2>&1 || { echo "SKIP: no $_tool"; exit 77; }
done

# free_port: a port no one listens on now.
free_port() {
	$REG_PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# registry_wait URL WHAT LOG [curl args]: polls URL until it answers HTTP (any status);
# FAIL naming WHAT, with LOG, after 10 s.
registry_wait() {
	url=$1; what=$2; log=$3; shift 3
	for _ in $(seq 200); do
		code=$(curl -s -o /dev/null -w '%{http_code}' "$@" "$url" 2>/dev/null)
		[ "$code" != 000 ] && [ -n "$code" ] && return 0
		sleep 0.05
	done
	echo "FAIL: $what did not answer $url within 10 s: $(cat "$log" 2>/dev/null)"
	exit 1
}

# registry_pki: $REG_CA (a CA made here), $REG_CERT and $REG_KEY (a server certificate it
# signed for IP:127.0.0.1 and DNS:localhost), $REG_TOK_CERT and $REG_TOK_KEY (the token
# service's signing pair, self-signed): made once per test.
registry_pki() {
	d="$T/pki"
	REG_CA="$d/ca.pem" REG_CERT="$d/srv.pem" REG_KEY="$d/srv.key"
	REG_TOK_CERT="$d/tok.pem" REG_TOK_KEY="$d/tok.key"
	[ -f "$REG_TOK_KEY" ] && return 0
	mkdir -p "$d"
	printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$d/ext"
	{ openssl req -x509 -newkey rsa:2048 -nodes -keyout "$d/ca.key" -out "$REG_CA" -days 2 \
		-subj "/CN=megacache test CA" &&
	  openssl req -newkey rsa:2048 -nodes -keyout "$REG_KEY" -out "$d/srv.csr" -subj "/CN=localhost" &&
	  openssl x509 -req -in "$d/srv.csr" -CA "$REG_CA" -CAkey "$d/ca.key" -CAcreateserial \
		-out "$REG_CERT" -days 2 -extfile "$d/ext" &&
	  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$REG_TOK_KEY" -out "$REG_TOK_CERT" \
		-days 2 -subj "/CN=megacache test tokens"; } >"$d/log" 2>&1 ||
		{ echo "FAIL: openssl could not make the test's certificates: $(cat "$d/log")"; exit 1; }
}

# token_start NAME: the token service for $REG_USER, logging its requests to $T/NAME/tokens.log;
# sets REG_TOKEN_PORT and REG_TOKEN_LOG.
token_start() {
	registry_pki
	mkdir -p "$T/$1"
	REG_TOKEN_PORT=$(free_port)
	REG_TOKEN_LOG="$T/$1/tokens.log"
	: >"$REG_TOKEN_LOG"
	printf '%s\n%s\n' "$REG_PASSWORD" "$REG_REFRESH" >"$T/$1/secrets" # by a file, not argv
	$REG_PY "$MC_SRCDIR/tests/tool/tokenserver.py" "$REG_TOKEN_PORT" "$REG_TOK_KEY" "$REG_TOK_CERT" \
		"$REG_USER" "$T/$1/secrets" mc-issuer "$REG_TOKEN_LOG" 2>"$T/$1/tokenserver.err" &
	REG_PIDS="$REG_PIDS $!"
	registry_wait "http://127.0.0.1:$REG_TOKEN_PORT/token" "the token service" "$T/$1/tokenserver.err"
	: >"$REG_TOKEN_LOG"
}

# registry_start NAME MODE [ADDR]: a registry of MODE (plain, basic, token) serving
# $T/NAME/data at ADDR (127.0.0.1) on a free port; sets REG_PORT (and, for token,
# REG_TOKEN_PORT and REG_TOKEN_LOG).
registry_start() {
	name=$1; mode=$2; addr=${3:-127.0.0.1}
	mkdir -p "$T/$name"
	REG_PORT=$(free_port)
	cfg="$T/$name/config.yml"
	printf 'version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n' >"$cfg"
	printf '    rootdirectory: %s\nhttp:\n  addr: %s:%s\n' "$T/$name/data" "$addr" "$REG_PORT" >>"$cfg"
	case $mode in
	plain) ;;
	basic|token)
		registry_pki
		printf '  tls:\n    certificate: %s\n    key: %s\nauth:\n' "$REG_CERT" "$REG_KEY" >>"$cfg" ;;
	*) echo "FAIL: registry_start: no mode $mode"; exit 1 ;;
	esac
	case $mode in
	basic)
		htpasswd -Bbn "$REG_USER" "$REG_PASSWORD" >"$T/$name/htpasswd" 2>/dev/null
		printf '  htpasswd:\n    realm: megacache-test\n    path: %s\n' "$T/$name/htpasswd" >>"$cfg" ;;
	token)
		token_start "$name"
		printf '  token:\n    realm: http://127.0.0.1:%s/token\n    service: mc-registry\n' \
			"$REG_TOKEN_PORT" >>"$cfg"
		printf '    issuer: mc-issuer\n    rootcertbundle: %s\n' "$REG_TOK_CERT" >>"$cfg" ;;
	esac
	docker-registry serve "$cfg" >"$T/$name/log" 2>&1 &
	REG_PIDS="$REG_PIDS $!"
	if [ "$mode" = plain ]; then
		registry_wait "http://127.0.0.1:$REG_PORT/v2/" "docker-registry $name" "$T/$name/log"
	else # through the CA made here: the TLS set-up itself is checked
		registry_wait "https://127.0.0.1:$REG_PORT/v2/" "docker-registry $name" "$T/$name/log" \
			--cacert "$REG_CA"
	fi
}
