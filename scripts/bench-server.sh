#!/usr/bin/env bash
# Queries per second of doxlab serve and CoreDNS side by side, on loopback,
# with dnsperf (Debian) as the load generator for Do53 UDP/TCP, DoT and
# DoH/2. Each row runs both servers in the same session, one after the other.
# DoQ and DoH/3 are measured by 'go test ./server -bench ServerQPS'.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${SECS:-5}
CLIENTS=${CLIENTS:-4}
PATH=$(go env GOPATH)/bin:$PATH
go build -o bin/doxlab ./cmd/doxlab
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
for i in $(seq 10000); do echo "q$i.example.test A"; done > "$work/queries"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -keyout "$work/key.pem" \
  -out "$work/cert.pem" -subj /CN=dns.test -addext "subjectAltName=IP:127.0.0.1" 2>/dev/null
cat > "$work/Corefile" <<CORE
dns://.:15300 tls://.:18853 https://.:18443 {
  bind 127.0.0.1
  tls $work/cert.pem $work/key.pem
  template IN A example.test {
    answer "{{ .Name }} 300 IN A 192.0.2.7"
  }
}
CORE
bin/doxlab serve --udp 127.0.0.1:25300 --tcp 127.0.0.1:25300 --dot 127.0.0.1:28853 --doh 127.0.0.1:28443 \
  --any 192.0.2.7 --cert "$work/cert.pem" --key "$work/key.pem" 2>/dev/null &
(cd "$work" && exec coredns -conf Corefile >/dev/null 2>&1) &
sleep 2
qps() { # mode port
  dnsperf -s 127.0.0.1 -p "$2" -m "$1" -d "$work/queries" -l "$SECS" -c "$CLIENTS" 2>&1 |
    awk '/Queries per second/ {q=$4} /Queries lost/ {l=$3} END {printf "%.0f %s", q, l}'
}
printf '%-5s %12s %8s %12s %8s %7s\n' mode doxlab_qps lost coredns_qps lost ratio
for row in udp:25300:15300 tcp:25300:15300 dot:28853:18853 doh:28443:18443; do
  IFS=: read -r mode dp cp <<<"$row"
  read -r dq dl <<<"$(qps "$mode" "$dp")"
  read -r cq cl <<<"$(qps "$mode" "$cp")"
  printf '%-5s %12s %8s %12s %8s %7.2f\n' "$mode" "$dq" "$dl" "$cq" "$cl" "$(echo "$dq / $cq" | bc -l)"
done
