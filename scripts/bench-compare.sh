#!/usr/bin/env bash
# doxlab bench beside dnsperf and h2load, against the same servers in one
# run, so that doxlab bench's figures can be checked against the tools
# operators trust: doxlab serve, CoreDNS, Unbound and Knot Resolver on
# loopback with static answers (scripts/lib/bench-servers.sh).
#
# Every tool gets the same load: CLIENTS connections (dnsperf -c, h2load -c,
# doxlab bench --conns) and OUTSTANDING queries in flight at most (dnsperf
# -q; h2load -m OUTSTANDING/CLIENTS per connection; doxlab bench
# --max-in-flight, open loop at a rate no server holds, so the window is
# what limits it). Latency is each tool's own from the query's send:
# dnsperf's average, h2load's mean request time, doxlab bench's service
# time (its latency from the intended send time is the queue's too, as a
# saturating run should show). The load generators run pinned to
# CLIENT_CPUS, the servers to SERVER_CPUS (defaults: CPU 0 and CPU 1 on a
# machine with two or more), so a generator cannot take its server's core.
# Run to run, a rate moves by up to ±10 % here: ROUNDS=3 runs each tool
# three times in turn and keeps each one's median run.
#   SECS=5 CLIENTS=4 OUTSTANDING=100 ROUNDS=1 bash scripts/bench-compare.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${SECS:-5}
CLIENTS=${CLIENTS:-4}
OUTSTANDING=${OUTSTANDING:-100}
ROUNDS=${ROUNDS:-1}
PATH=$(go env GOPATH)/bin:$PATH
. scripts/lib/bench-servers.sh
split_cpus
bench_prelude dnsperf h2load jq

# Each prints "queries/s mean-ms lost".
dnsperf_run() { # mode port
  local m=$1
  [ "$m" = doh ] && m="doh -O doh-method=GET"
  # Over TCP, DoT and DoH dnsperf also gives its connections' latency,
  # after a 'Connection Statistics' heading: the queries' comes first.
  # shellcheck disable=SC2086
  pin_client dnsperf -s 127.0.0.1 -p "$2" -m $m -d "$work/queries" -l "$SECS" -c "$CLIENTS" -q "$OUTSTANDING" 2>&1 |
    awk '/Queries per second/ {q=$4} /Queries lost/ {l=$3} /^Connection Statistics/ {c=1}
         /Average Latency/ && !c {a=$4*1000} END {printf "%.0f %.3f %s", q, a, l}'
}
# h2load asks the same 10,000 names as dnsperf and doxlab bench, a GET
# URI each with the query's ID 0 (RFC 8484 §4.1), in turn: one URI asked
# over and over would make every request header a one-octet HPACK index.
h2load_run() { # port
  python3 - "$work/queries" "$1" >"$work/uris" <<'EOF_PY'
import base64, sys
for line in open(sys.argv[1]):
    name = line.split()[0].rstrip(".")
    wire = b"\0\0\1\0\0\1\0\0\0\0\0\0" + b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0\0\1\0\1"
    print(f"https://127.0.0.1:{sys.argv[2]}/dns-query?dns=" + base64.urlsafe_b64encode(wire).decode().rstrip("="))
EOF_PY
  pin_client h2load -D "$SECS" -t 1 -c "$CLIENTS" -m $((OUTSTANDING / CLIENTS)) -H 'accept: application/dns-message' \
    -i "$work/uris" 2>&1 |
    awk '/^finished in/ {gsub(",","",$4); r=$4}
         /^requests:/ {f=$10}
         /^time for request:/ {v=$6; u=v; sub(/[a-z]+$/,"",v); sub(/^[0-9.]+/,"",u); ms=(u=="us")?v/1000:(u=="s")?v*1000:v}
         END {printf "%.0f %.3f %s", r, ms, f}'
}
doxlab_run() { # url
  pin_client bin/doxlab bench --quiet --json --ca "$work/cert.pem" --rate 1000000 --max-in-flight "$OUTSTANDING" \
    --conns "$CLIENTS" --duration "${SECS}s" --names "$work/queries" "$1" |
    jq -r '"\(.answered_qps|floor) \(.service.mean_ms*1000|floor/1000) \(.sent - .answered) \(.cpu_per_query_us*10|floor/10)"'
}
# median: of the runs given one per line (after a first line, "-" when
# the tool does not run here), the one of median queries/s.
median() { sed 1d | sort -n -k1,1 | awk '{l[NR]=$0} END {print NR ? l[int((NR+1)/2)] : "-"}'; }
# window QPS MS: the queries really in flight, by Little's law: a tool
# that keeps fewer in flight than asked (its own CPU the limit) shows it.
window() { awk -v q="$1" -v l="$2" 'BEGIN {printf "%.0f", q * l / 1000}'; }

echo "doxlab bench beside dnsperf and h2load: $CLIENTS connections, $OUTSTANDING queries in flight at most, $SECS s each, median of $ROUNDS run(s)"
echo "load generators on CPU ${CLIENT_CPUS:-any}, servers on CPU ${SERVER_CPUS:-any}; qps answered, mean ms from the send, ~in flight (qps × mean), lost"
printf '%-14s %-5s %32s %32s %38s %6s\n' server mode dnsperf h2load "doxlab bench" ratio
for srv in "${SERVERS[@]}"; do
  for mode in udp tcp dot doh doq doh3; do
    case $mode in doq|doh3) [ "$srv" = doxlab ] || continue ;; esac
    d=- h=- x=
    # A tool that fails leaves its cell at 0/s and the row goes on. With
    # ROUNDS > 1 the tools take turns, and each cell is its median run.
    for _ in $(seq "$ROUNDS"); do
      case $mode in doq|doh3) ;; *) d+=$'\n'$(dnsperf_run "$mode" "$(port "$srv" "$mode")" || echo "0 0 -") ;; esac
      [ "$mode" = doh ] && h+=$'\n'$(h2load_run "$(port "$srv" doh)" || echo "0 0 -")
      x+=$'\n'$(doxlab_run "$(url "$srv" "$mode")" || echo "0 0 - -")
    done
    d=$(median <<<"$d") h=$(median <<<"$h") x=$(median <<<"$x")
    read -r dq dl dlost <<<"${d/-/- - -}"
    read -r hq hl hlost <<<"${h/-/- - -}"
    read -r xq xl xlost xcpu <<<"$x"
    best=$dq
    [ "$hq" != - ] && [ "${hq%.*}" -gt "${best%.*}" ] && best=$hq
    ratio=-
    [ "$best" != - ] && [ "${best%.*}" -gt 0 ] && ratio=$(awk -v a="$xq" -v b="$best" 'BEGIN {printf "%.2f", a/b}')
    printf '%-14s %-5s %32s %32s %38s %6s\n' "$srv" "$mode" \
      "$( [ "$dq" = - ] && echo - || printf '%s/s %s ms ~%s %s lost' "$dq" "$dl" "$(window "$dq" "$dl")" "$dlost")" \
      "$( [ "$hq" = - ] && echo - || printf '%s/s %s ms ~%s %s failed' "$hq" "$hl" "$(window "$hq" "$hl")" "$hlost")" \
      "$(printf '%s/s %s ms ~%s %s lost %s us/q' "$xq" "$xl" "$(window "$xq" "$xl")" "$xlost" "$xcpu")" "$ratio"
  done
done
echo "ratio: doxlab bench's queries/s over the best of dnsperf and h2load against the same server."
