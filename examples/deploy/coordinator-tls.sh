#!/usr/bin/env bash
# coordinator-tls: a campaign's own CA, and a certificate for its
# PostgreSQL server signed by it (docs/vantage-points.md). Workers verify
# the server against ca.crt and its name (sslmode=verify-full), so no one
# on the path between a vantage point and the coordinator can pose as it.
#
#   bash coordinator-tls.sh DIR NAME...
#
# NAME: each DNS name and IP address workers reach the coordinator by
# (IP addresses as they are: 203.0.113.10). Writes DIR/ca.crt (give it to
# every worker), DIR/ca.key (keep it offline), DIR/server.crt and
# DIR/server.key (for PostgreSQL's ssl_cert_file and ssl_key_file).
# ECDSA P-256 keys; the server's certificate lasts 825 days, the CA's ten
# years. Needs openssl.
set -euo pipefail
dir=$1
shift
[ $# -gt 0 ] || { echo "usage: coordinator-tls.sh DIR NAME..." >&2; exit 2; }
mkdir -p "$dir"
cd "$dir"
san=""
for n in "$@"; do
	if [[ $n =~ ^[0-9.]+$ || $n == *:* ]]; then
		san+="${san:+,}IP:$n"
	else
		san+="${san:+,}DNS:$n"
	fi
done
if [ ! -f ca.key ]; then
	openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.crt \
		-days 3650 -subj "/CN=doxlab campaign CA" -addext "basicConstraints=critical,CA:TRUE" \
		-addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
fi
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout server.key -out server.csr \
	-subj "/CN=$1" 2>/dev/null
openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 825 \
	-extfile <(printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature\n' "$san") 2>/dev/null
rm -f server.csr
chmod 600 ca.key server.key
echo "coordinator-tls: ca.crt for the workers; server.crt and server.key for PostgreSQL ($san)"
