#!/usr/bin/env bash
# Installs the real, independent DNS peers doxlab's tests and demo run
# against, all on loopback. Idempotent: a second run only checks.
#   Debian:          unbound, knot-resolver and nghttp2-client's h2load
#                    (make bench compares against them), jq, openssl
#   Go module proxy: CoreDNS v1.15.0 (DoT, DoH/2, DoH/3, DoQ)
#   Debian:          knot-dnsutils (kdig), bind9-dnsutils (dig), dnsperf,
#                    tshark (reads the testbed's captures), wget (mirrors a page
#                    for the corpus's snapshot test), iproute2,
#                    postgresql (the shared store's tests start their own cluster),
#                    chromium (the web experiment; renders the HTML report in a test),
#                    nftables (the page loader's firewall), and the
#                    doxlab-browser user page loads run Chromium as;
#                    buildah, debootstrap, umoci and runc (make images,
#                    and the e2e test that runs the images' workers)
#   crates.io:       doh-proxy 0.11.1 (an independent Oblivious DoH target)
#   PyPI:            aioquic 1.7.2 (its DoQ server and HTTP/3 client examples),
#                    aioquic 0.9.25 in a venv (QUIC drafts 29-32, for verify),
#                    dnslib, wsproto, dnspython 2.9.2 with DoH and DoQ,
#                    numpy (the reference for the statistics tests)
set -euo pipefail

COREDNS_VERSION=v1.15.0
H2SPEC_VERSION=v2.2.1+incompatible
AIOQUIC_VERSION=1.7.2
DNSLIB_VERSION=0.9.26
DNSPYTHON_VERSION=2.9.2
WSPROTO_VERSION=1.2.0
NUMPY_VERSION=2.4.6
DUCKDB_VERSION=2.0.1
PYARROW_VERSION=26.0.1
PANDAS_VERSION=3.1.1
VERSITYGW_VERSION=v1.8.0
PEERS=${DOXLAB_PEERS:-/opt/doxlab-peers}

say() { printf 'install-peers: %s\n' "$*"; }

missing=()
for pkg in unbound knot-resolver jq openssl knot-dnsutils bind9-dnsutils dnsperf nghttp2-client curl wget tshark iproute2 nftables postgresql chromium firefox-esr libnss3-tools python3-venv buildah debootstrap umoci runc systemd; do
  # dpkg -s also succeeds for a removed package whose config files remain.
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if ((${#missing[@]})); then
  say "apt-get install ${missing[*]}"
  apt-get update -qq
  # tshark asks whether non-root users may capture; the testbed runs as root.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Page loads run Chromium as a system user of its own, with its sandbox
# on (docs/campaigns.md, "What a vantage point exposes").
if ! id doxlab-browser >/dev/null 2>&1; then
  say "useradd doxlab-browser (the page loader's browser user)"
  useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin doxlab-browser
fi

GOBIN=$(go env GOPATH)/bin
# Read the version whole: with pipefail, 'coredns -version | grep -q'
# fails when grep closes the pipe early.
have=$("$GOBIN/coredns" -version 2>/dev/null || true)
if [[ "$have" != *"CoreDNS-${COREDNS_VERSION#v}"* ]]; then
  say "building CoreDNS $COREDNS_VERSION (a few minutes)"
  go install "github.com/coredns/coredns@$COREDNS_VERSION"
fi

# h2spec checks the DoH listener's HTTP/2 against RFC 7540 and 7541.
if ! go version -m "$GOBIN/h2spec" 2>/dev/null | grep -q "$H2SPEC_VERSION"; then
  say "building h2spec $H2SPEC_VERSION"
  go install "github.com/summerwind/h2spec/cmd/h2spec@$H2SPEC_VERSION"
fi

# Versity's S3 gateway (Apache 2.0) serves a directory as an S3 bucket:
# the object store datasets are read from in tests.
if ! go version -m "$GOBIN/versitygw" 2>/dev/null | grep -q "versitygw.*$VERSITYGW_VERSION"; then
  say "building versitygw $VERSITYGW_VERSION"
  go install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION"
fi

# numpy is the reference outside Go that doxlab's statistics are checked
# against (type-7 quantiles, as pandas and DuckDB compute them).
if ! python3 -c "import aioquic, dnslib, wsproto, dns.version, numpy, sys; sys.exit(aioquic.__version__ != '$AIOQUIC_VERSION' or dns.version.version != '$DNSPYTHON_VERSION' or numpy.__version__ != '$NUMPY_VERSION')" 2>/dev/null; then
  say "pip install aioquic==$AIOQUIC_VERSION dnslib==$DNSLIB_VERSION wsproto==$WSPROTO_VERSION dnspython[doh,doq]==$DNSPYTHON_VERSION numpy==$NUMPY_VERSION"
  python3 -m pip install -q --root-user-action=ignore "aioquic==$AIOQUIC_VERSION" "dnslib==$DNSLIB_VERSION" \
    "wsproto==$WSPROTO_VERSION" "dnspython[doh,doq]==$DNSPYTHON_VERSION" "numpy==$NUMPY_VERSION"
fi

# DuckDB and pandas (over pyarrow) read the datasets doxlab exports: the
# engines a dataset's files are checked against.
if ! python3 -c "import duckdb, pyarrow, pandas, sys; sys.exit(duckdb.__version__ != '$DUCKDB_VERSION' or pyarrow.__version__ != '$PYARROW_VERSION' or pandas.__version__ != '$PANDAS_VERSION')" 2>/dev/null; then
  say "pip install duckdb==$DUCKDB_VERSION pyarrow==$PYARROW_VERSION pandas==$PANDAS_VERSION"
  python3 -m pip install -q --root-user-action=ignore "duckdb==$DUCKDB_VERSION" "pyarrow==$PYARROW_VERSION" "pandas==$PANDAS_VERSION" "numpy==$NUMPY_VERSION"
fi

# aioquic's DoQ server is an example: it ships in the sdist only.
if [ ! -f "$PEERS/aioquic/examples/doq_server.py" ]; then
  say "unpacking aioquic $AIOQUIC_VERSION examples into $PEERS/aioquic"
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps --no-binary :all: "aioquic==$AIOQUIC_VERSION" -d "$tmp"
  tar -xzf "$tmp/aioquic-$AIOQUIC_VERSION.tar.gz" -C "$tmp"
  mkdir -p "$PEERS/aioquic"
  cp -r "$tmp/aioquic-$AIOQUIC_VERSION/examples" "$PEERS/aioquic/"
  rm -rf "$tmp"
fi
# aioquic 0.9.25 in its own venv: the last release that speaks QUIC drafts
# 29-32, for verifying (and testing against) draft-era DoQ servers.
AIOQUIC_DRAFTS_VERSION=0.9.25
if ! "$PEERS/aioquic-drafts/bin/python" -c "import aioquic, sys; sys.exit(aioquic.__version__ != '$AIOQUIC_DRAFTS_VERSION')" 2>/dev/null; then
  say "pip install aioquic==$AIOQUIC_DRAFTS_VERSION into $PEERS/aioquic-drafts"
  python3 -m venv "$PEERS/aioquic-drafts"
  "$PEERS/aioquic-drafts/bin/pip" install -q "aioquic==$AIOQUIC_DRAFTS_VERSION"
fi
# doh-proxy (DNSCrypt's, Rust, odoh-rs) is the independent ODoH target
# doxlab's proxy and client are tested against (docs/privacy.md).
DOH_PROXY_VERSION=0.11.1
CARGO=$(command -v cargo || echo "$HOME/.cargo/bin/cargo")
if [[ "$("$PEERS/bin/doh-proxy" --version 2>/dev/null || true)" != *"$DOH_PROXY_VERSION"* ]]; then
  if [ ! -x "$CARGO" ]; then
    say "no cargo: doh-proxy needs Rust's cargo (rustup's, or: apt-get install cargo, if its rustc is recent enough)"
    exit 1
  fi
  say "cargo install doh-proxy $DOH_PROXY_VERSION into $PEERS (about a minute)"
  "$CARGO" install -q --locked --root "$PEERS" "doh-proxy@$DOH_PROXY_VERSION"
fi
say "peers ready: coredns $("$GOBIN/coredns" -version | head -1), $(unbound -V | head -1), aioquic $AIOQUIC_VERSION"
