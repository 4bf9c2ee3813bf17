#!/usr/bin/env bash
# Queries per second of doxlab serve, CoreDNS, Unbound and Knot Resolver
# side by side, on loopback, with static answers. dnsperf (Debian) drives
# Do53 UDP/TCP, DoT and DoH/2 (POST); h2load (Debian nghttp2-client)
# drives DoH/2 GET as a reference HTTP/2 load generator. Every server runs
# in the same session, each row one server after the other. DoQ and DoH/3
# are measured by 'go test ./server -bench ServerQPS'.
#   SECS=5 CLIENTS=4 OUTSTANDING=100 SERVER_CPUS= bash scripts/bench-server.sh
# (scripts/bench-compare.sh runs doxlab bench beside dnsperf and h2load.)
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${SECS:-5}
CLIENTS=${CLIENTS:-4}
OUTSTANDING=${OUTSTANDING:-100}
PATH=$(go env GOPATH)/bin:$PATH
. scripts/lib/bench-servers.sh
bench_prelude dnsperf h2load

dnsperf_qps() { # mode port
  dnsperf -s 127.0.0.1 -p "$2" -m "$1" -d "$work/queries" -l "$SECS" -c "$CLIENTS" -q "$OUTSTANDING" 2>&1 |
    awk '/Queries per second/ {q=$4} /Queries lost/ {l=$3} END {printf "%.0f/%s", q, l}'
}
h2load_rps() { # port
  local q
  q=$(doh_get_query)
  h2load -D "$SECS" -c "$CLIENTS" -m "$OUTSTANDING" "https://127.0.0.1:$1/dns-query?dns=$q" 2>&1 |
    awk '/^finished in/ {gsub(",","",$4); r=$4} /^requests:/ {f=$10} END {printf "%.0f/%s", r, f}'
}
printf 'queries/s and lost (dnsperf) or failed (h2load); -c %s, %s outstanding, %s s each\n' "$CLIENTS" "$OUTSTANDING" "$SECS"
printf '%-10s %14s %14s %14s %14s\n' mode doxlab coredns unbound knot-resolver
for mode in udp tcp dot doh h2load; do
  row=()
  for srv in "${SERVERS[@]}"; do
    case $mode in
      h2load) row+=("$(h2load_rps "$(port "$srv" doh)")") ;;
      *) row+=("$(dnsperf_qps "$mode" "$(port "$srv" "$mode")")") ;;
    esac
  done
  printf '%-10s %14s %14s %14s %14s\n' "$mode" "${row[@]}"
done
