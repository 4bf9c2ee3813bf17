#!/usr/bin/env bash
# The servers' CPU per query at a load every one of them holds: doxlab
# serve, CoreDNS, Unbound and Knot Resolver on loopback with static
# answers (scripts/lib/bench-servers.sh), each loaded open-loop by doxlab
# bench at the same rate. Where the load generator, not the server, is
# what limits a saturating run (scripts/bench-compare.sh shows it: on two
# CPUs doxlab bench needs about a core for 200k UDP queries/s), the
# server's CPU time per answered query is what compares the servers: the
# inverse is the rate one core of it would hold.
#   SECS=5 RATE=50000 DOH_RATE=20000 bash scripts/bench-server-cpu.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${SECS:-5}
RATE=${RATE:-50000}
DOH_RATE=${DOH_RATE:-20000}
PATH=$(go env GOPATH)/bin:$PATH
. scripts/lib/bench-servers.sh
split_cpus
bench_prelude jq

# pids SERVER: the server's processes, found by the ports it was given.
pids() {
  case $1 in
    doxlab) pgrep -f "doxlab serve --udp 127.0.0.1:$(port doxlab udp)" ;;
    coredns) pgrep -x coredns ;;
    unbound) pgrep -x unbound ;;
    knot-resolver) pgrep -x kresd ;;
  esac
}

# ticks PID...: user and system CPU time in clock ticks, summed.
ticks() { for p in "$@"; do awk '{print $14 + $15}' "/proc/$p/stat"; done | awk '{s += $1} END {print s}'; }

hz=$(getconf CLK_TCK)
echo "server CPU per answered query, doxlab bench open loop at $RATE/s ($DOH_RATE/s over DoH), $SECS s each"
echo "load generator on CPU ${CLIENT_CPUS:-any}, servers on CPU ${SERVER_CPUS:-any}; 1 s of CPU / µs per query = the queries/s one core of the server holds (not given for a run that lost queries)"
printf '%-14s %-5s %12s %8s %10s %14s\n' server mode answered/s lost "µs/query" "core holds/s"
for srv in "${SERVERS[@]}"; do
  mapfile -t ps < <(pids "$srv")
  for mode in udp tcp dot doh doq doh3; do
    case $mode in doq|doh3) [ "$srv" = doxlab ] || continue ;; esac
    rate=$RATE
    case $mode in doh|doh3) rate=$DOH_RATE ;; esac
    t0=$(ticks "${ps[@]}")
    r=$(pin_client bin/doxlab bench --quiet --json --ca "$work/cert.pem" --rate "$rate" --max-in-flight 1000 \
      --conns 4 --duration "${SECS}s" --names "$work/queries" "$(url "$srv" "$mode")" |
      jq -r '"\(.answered_qps|floor) \(.sent - .answered) \(.answered)"') || r="0 - 0"
    t1=$(ticks "${ps[@]}")
    read -r q lost n <<<"$r"
    awk -v q="$q" -v lost="$lost" -v n="$n" -v t=$((t1 - t0)) -v hz="$hz" -v srv="$srv" -v mode="$mode" 'BEGIN {
      us = n > 0 ? t / hz * 1e6 / n : 0
      printf "%-14s %-5s %12d %8s %10.2f %14s\n", srv, mode, q, lost, us, (us > 0 && lost == 0 ? sprintf("%.0f", 1e6 / us) : "-") }'
  done
done
