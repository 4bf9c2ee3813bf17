#!/usr/bin/env bash
# Queries per second of doxlab serve, CoreDNS, Unbound and Knot Resolver
# side by side, on loopback, with static answers. dnsperf (Debian) drives
# Do53 UDP/TCP, DoT and DoH/2 (POST); h2load (Debian nghttp2-client)
# drives DoH/2 GET as a reference HTTP/2 load generator. Every server runs
# in the same session, each row one server after the other. DoQ and DoH/3
# are measured by 'go test ./server -bench ServerQPS'.
#   SECS=5 CLIENTS=4 OUTSTANDING=100 bash scripts/bench-server.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${SECS:-5}
CLIENTS=${CLIENTS:-4}
OUTSTANDING=${OUTSTANDING:-100}
PATH=$(go env GOPATH)/bin:$PATH
for bin in dnsperf h2load coredns unbound kresd; do
  command -v "$bin" >/dev/null || { echo "bench-server: $bin missing (make peers installs it)" >&2; exit 1; }
done
go build -o bin/doxlab ./cmd/doxlab
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
for i in $(seq 10000); do echo "q$i.example.test A"; done > "$work/queries"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -keyout "$work/key.pem" \
  -out "$work/cert.pem" -subj /CN=dns.test -addext "subjectAltName=IP:127.0.0.1" 2>/dev/null

# Ports: doxlab 2xxxx, CoreDNS 1xxxx, Unbound 3xxxx, Knot Resolver 4xxxx;
# x5300 Do53, x8853 DoT, x8443 DoH.
bin/doxlab serve --udp 127.0.0.1:25300 --tcp 127.0.0.1:25300 --dot 127.0.0.1:28853 --doh 127.0.0.1:28443 \
  --any 192.0.2.7 --cert "$work/cert.pem" --key "$work/key.pem" 2>/dev/null &

cat > "$work/Corefile" <<CORE
dns://.:15300 tls://.:18853 https://.:18443 {
  bind 127.0.0.1
  tls $work/cert.pem $work/key.pem
  template IN A example.test {
    answer "{{ .Name }} 300 IN A 192.0.2.7"
  }
}
CORE
(cd "$work" && exec coredns -conf Corefile >/dev/null 2>&1) &

cat > "$work/unbound.conf" <<UNB
server:
  interface: 127.0.0.1@35300
  interface: 127.0.0.1@38853
  interface: 127.0.0.1@38443
  port: 35300
  tls-port: 38853
  https-port: 38443
  tls-service-key: "$work/key.pem"
  tls-service-pem: "$work/cert.pem"
  num-threads: 2
  do-daemonize: no
  username: ""
  chroot: ""
  directory: "$work"
  pidfile: ""
  use-syslog: no
  logfile: "$work/unbound.log"
  access-control: 127.0.0.0/8 allow
  local-zone: "example.test." redirect
  local-data: "example.test. 300 IN A 192.0.2.7"
UNB
unbound -c "$work/unbound.conf" &

mkdir -p "$work/kresd"
cat > "$work/kresd.conf" <<KRES
net.listen('127.0.0.1', 45300, { kind = 'dns' })
net.listen('127.0.0.1', 48853, { kind = 'tls' })
net.listen('127.0.0.1', 48443, { kind = 'doh2' })
net.tls('$work/cert.pem', '$work/key.pem')
policy.add(policy.suffix(policy.ANSWER({ [kres.type.A] = { rdata = kres.str2ip('192.0.2.7'), ttl = 300 } }), { todname('example.test.') }))
KRES
# Two processes, as Unbound has two threads.
for _ in 1 2; do kresd --noninteractive -q -c "$work/kresd.conf" "$work/kresd" >/dev/null 2>&1 & done
sleep 3

dnsperf_qps() { # mode port
  dnsperf -s 127.0.0.1 -p "$2" -m "$1" -d "$work/queries" -l "$SECS" -c "$CLIENTS" -q "$OUTSTANDING" 2>&1 |
    awk '/Queries per second/ {q=$4} /Queries lost/ {l=$3} END {printf "%.0f/%s", q, l}'
}
h2load_rps() { # port
  local q
  q=$(printf '\0\0\1\0\0\1\0\0\0\0\0\0\3www\7example\4test\0\0\1\0\1' | base64 -w0 | tr '+/' '-_' | tr -d '=')
  h2load -D "$SECS" -c "$CLIENTS" -m "$OUTSTANDING" "https://127.0.0.1:$1/dns-query?dns=$q" 2>&1 |
    awk '/^finished in/ {gsub(",","",$4); r=$4} /^requests:/ {f=$10} END {printf "%.0f/%s", r, f}'
}
printf 'queries/s and lost (dnsperf) or failed (h2load); -c %s, %s outstanding, %s s each\n' "$CLIENTS" "$OUTSTANDING" "$SECS"
printf '%-10s %14s %14s %14s %14s\n' mode doxlab coredns unbound knot-resolver
for mode in udp tcp dot doh h2load; do
  row=()
  for base in 20000 10000 30000 40000; do
    case $mode in
      udp|tcp) row+=("$(dnsperf_qps "$mode" $((base + 5300)))") ;;
      dot) row+=("$(dnsperf_qps dot $((base + 8853)))") ;;
      doh) row+=("$(dnsperf_qps doh $((base + 8443)))") ;;
      h2load) row+=("$(h2load_rps $((base + 8443)))") ;;
    esac
  done
  printf '%-10s %14s %14s %14s %14s\n' "$mode" "${row[@]}"
done
