#!/usr/bin/env bash
# The first query of a new DoT connection from Unbound, which leaves
# Nagle's algorithm on when it forwards over TLS: with a server that
# delays its ACK of the TLS Finished, the query waits ~40 ms for it.
# Prints dig's query time through Unbound for N fresh Unbound processes
# (each a new upstream connection) to doxlab serve's DoT listener, and
# through stubby (which never sets TCP_NODELAY) when it is installed.
# Loopback only. Usage: scripts/nagle-check.sh [DOXLAB] [N]
set -euo pipefail
DOXLAB=${1:-bin/doxlab}
N=${2:-6}
DOXLAB=$(realpath "$DOXLAB")
dir=$(mktemp -d)
trap 'pkill -f "serve --config $dir/serve.yaml" || true; rm -rf "$dir"' EXIT
cat > "$dir/serve.yaml" <<YAML
listen: {dot: 127.0.0.1:18853}
answers: {any: 192.0.2.1}
tls: {cert_out: $dir/ca.pem}
YAML
cat > "$dir/unbound.conf" <<CONF
server:
  interface: 127.0.0.1@15353
  do-daemonize: no
  username: ""
  chroot: ""
  directory: "$dir"
  pidfile: ""
  use-syslog: no
  logfile: ""
  tls-cert-bundle: $dir/ca.pem
  access-control: 127.0.0.0/8 allow
  do-not-query-localhost: no
  qname-minimisation: no
  module-config: "iterator"
  do-ip6: no
forward-zone:
  name: "."
  forward-addr: 127.0.0.1@18853#localhost
  forward-tls-upstream: yes
CONF
"$DOXLAB" serve --config "$dir/serve.yaml" > "$dir/serve.log" 2>&1 &
for _ in $(seq 50); do [ -s "$dir/ca.pem" ] && break; sleep 0.1; done
for i in $(seq "$N"); do
  unbound -c "$dir/unbound.conf" > "$dir/unbound.log" 2>&1 & ub=$!
  for _ in $(seq 50); do dig @127.0.0.1 -p 15353 +short +tries=1 +time=1 . SOA > /dev/null 2>&1 && break; sleep 0.05; done
  kill $ub; wait $ub 2> /dev/null || true
  unbound -c "$dir/unbound.conf" > "$dir/unbound.log" 2>&1 & ub=$!
  sleep 0.3
  dig @127.0.0.1 -p 15353 +tries=1 "q$i-$RANDOM.example" | sed -n 's/;; Query time: \(.*\)/first query through Unbound over DoT: \1/p'
  kill $ub; wait $ub 2> /dev/null || true
done
command -v stubby > /dev/null || exit 0
cat > "$dir/stubby.yml" <<YAML
resolution_type: GETDNS_RESOLUTION_STUB
dns_transport_list: [GETDNS_TRANSPORT_TLS]
tls_authentication: GETDNS_AUTHENTICATION_REQUIRED
tls_ca_file: "$dir/ca.pem"
listen_addresses: [127.0.0.1@15354]
idle_timeout: 10000
round_robin_upstreams: 0
upstream_recursive_servers:
  - address_data: 127.0.0.1
    tls_port: 18853
    tls_auth_name: "localhost"
YAML
for i in $(seq "$N"); do
  stubby -C "$dir/stubby.yml" > "$dir/stubby.log" 2>&1 & sb=$!
  for _ in $(seq 50); do ss -lun | grep -q 127.0.0.1:15354 && break; sleep 0.05; done
  dig @127.0.0.1 -p 15354 +tries=1 "s$i-$RANDOM.example" | sed -n 's/;; Query time: \(.*\)/first query through stubby over DoT: \1/p'
  kill $sb; wait $sb 2> /dev/null || true
done
