#!/usr/bin/env bash
# doxlab's end-to-end demo: CoreDNS and doxlab serve, on loopback, serve one
# zone over Do53, DoT, DoH/1.1, DoH/2, DoH/3 and DoQ; doxlab measures every
# transport of each under the papers' conditions (a fresh connection per query; resumed with
# a TLS ticket; 0-RTT where the transport allows), after a cache-warming
# query, and prints medians from its own per-exchange JSON records (the
# median of an even count is the mean of the middle two, as numpy's and
# internal/stats' are).
# Only loopback is used. Run it with 'make demo'.
set -euo pipefail
cd "$(dirname "$0")/.."
DOXLAB=${DOXLAB:-bin/doxlab}
N=${N:-20}
PATH=$(go env GOPATH)/bin:$PATH

work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
p53=$(free_port); pdot=$(free_port); pdoh=$(free_port); pdoq=$(free_port)

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -keyout "$work/key.pem" -out "$work/cert.pem" -subj /CN=dns.test \
  -addext "subjectAltName=DNS:dns.test,IP:127.0.0.1" 2>/dev/null
cat > "$work/test.zone" <<ZONE
\$ORIGIN test.
@       3600 IN SOA ns.test. hostmaster.test. 1 7200 3600 1209600 300
@       3600 IN NS  ns.test.
ns      3600 IN A   127.0.0.1
example  300 IN A   192.0.2.1
ZONE
cat > "$work/Corefile" <<CORE
dns://test:$p53 tls://test:$pdot https://test:$pdoh https3://test:$pdoh quic://test:$pdoq {
  bind 127.0.0.1
  tls $work/cert.pem $work/key.pem
  file $work/test.zone test
}
CORE
(cd "$work" && exec coredns -conf Corefile >coredns.log 2>&1) &
for _ in $(seq 100); do
  "$DOXLAB" query --timeout 200ms "udp://127.0.0.1:$p53" example.test >/dev/null 2>&1 && break
  sleep 0.1
done

# doxlab's own server on the same kinds of ports, same certificate.
d53=$(free_port); ddot=$(free_port); ddoh=$(free_port); dretry=$(free_port)
"$DOXLAB" serve --udp 127.0.0.1:$d53 --tcp 127.0.0.1:$d53 --dot 127.0.0.1:$ddot --doq 127.0.0.1:$ddot \
  --doh 127.0.0.1:$ddoh --doh3 127.0.0.1:$ddoh --zone "$work/test.zone" \
  --cert "$work/cert.pem" --key "$work/key.pem" --records "$work/records.jsonl" 2>/dev/null &
"$DOXLAB" serve --doq 127.0.0.1:$dretry --retry always --zone "$work/test.zone" \
  --cert "$work/cert.pem" --key "$work/key.pem" 2>/dev/null &
for _ in $(seq 100); do
  "$DOXLAB" query --timeout 200ms "udp://127.0.0.1:$d53" example.test >/dev/null 2>&1 && break
  sleep 0.1
done

row() { # transport condition url flags...
  local name=$1 cond=$2 url=$3; shift 3
  "$DOXLAB" query --json --warmup --repeat "$N" --ca "$work/cert.pem" "$@" "$url" example.test A |
    jq -rs --arg n "$name" --arg c "$cond" '
      map(select(.warmup != true)) as $r
      | def med(f): ($r | map(f) | sort) as $s | ($s | length) as $n | if $n == 0 then null elif $n % 2 == 1 then $s[($n - 1) / 2] else ($s[$n / 2 - 1] + $s[$n / 2]) / 2 end;
      [$n, $c, med(.timing.connect_ms), med(.timing.handshake_ms), med(.timing.query_ms), med(.timing.total_ms),
       med(.bytes.sent), med(.bytes.received),
       ($r | map(select(.conn.tls_resumed)) | length | tostring) + "/" + ($r|length|tostring),
       ($r | map(select(.conn.used_0rtt)) | length | tostring) + "/" + ($r|length|tostring),
       ($r | map(select(.status != "ok")) | length) ] | @tsv' |
    awk -F'\t' '{printf "%-6s %-8s %10.3f %10.3f %10.3f %10.3f %9.1f %8.1f %6s %6s%s\n",$1,$2,$3,$4,$5,$6,$7,$8,$9,$10,($11>0?"  FAILED "$11:"")}'
}

header() {
  echo
  echo "$1; $N queries per row after a cache-warming query, medians"
  printf '%-6s %-8s %10s %10s %10s %10s %9s %8s %6s %6s\n' transport cond connect_ms handsh_ms query_ms total_ms bytes_tx bytes_rx resum 0rtt
}
table() { # p53 pdot pdoh pdoq
  row udp  fresh "udp://127.0.0.1:$1"
  row tcp  fresh "tcp://127.0.0.1:$1"
  for cond in fresh resumed; do
    flags=(); [ $cond = resumed ] && flags=(--resume)
    row dot  $cond "tls://127.0.0.1:$2" "${flags[@]}"
    row doh1 $cond "https://127.0.0.1:$3/dns-query" --http 1.1 "${flags[@]}"
    row doh2 $cond "https://127.0.0.1:$3/dns-query" "${flags[@]}"
    row doh3 $cond "h3://127.0.0.1:$3/dns-query" "${flags[@]}"
    row doq  $cond "quic://127.0.0.1:$4" "${flags[@]}"
  done
  row doh3 0-rtt "h3://127.0.0.1:$3/dns-query" --0rtt
  row doq  0-rtt "quic://127.0.0.1:$4" --0rtt
}
echo "doxlab $("$DOXLAB" version | cut -d' ' -f2-) on loopback"
header "CoreDNS ($(coredns -version | head -1)), an independent server"
table "$p53" "$pdot" "$pdoh" "$pdoq"
header "doxlab serve"
table "$d53" "$ddot" "$ddoh" "$ddot"
row doq  fresh "quic://127.0.0.1:$dretry"
echo "       ^ doxlab serve --retry always: every new connection pays a Retry round trip"
echo "doxlab serve wrote $(wc -l < "$work/records.jsonl") server-side records (one JSON line per query and connection)."
# Across an emulated access link: doxlab serve in the testbed's server host,
# doxlab query in its client host, every duration in round trips.
tb=demo$$
"$DOXLAB" testbed up --name "$tb" --profile fiber >/dev/null
trap 'kill $(jobs -p) 2>/dev/null; "$DOXLAB" testbed down --name "$tb" >/dev/null 2>&1; rm -rf "$work"' EXIT
"$DOXLAB" testbed exec --name "$tb" server -- "$DOXLAB" serve --udp 10.200.0.2:53 --tcp 10.200.0.2:53 \
  --dot 10.200.0.2:853 --doq 10.200.0.2:853 --doh 10.200.0.2:443 --doh3 10.200.0.2:443 \
  --zone "$work/test.zone" --cert "$work/cert.pem" --key "$work/key.pem" 2>/dev/null &
for _ in $(seq 100); do
  "$DOXLAB" testbed exec --name "$tb" client -- "$DOXLAB" query --timeout 200ms udp://10.200.0.2 example.test >/dev/null 2>&1 && break
  sleep 0.1
done
rtt=14.8
echo
echo "Across the testbed's fiber link (RTT $rtt ms, 99.9/109.1 Mbit/s): medians of $N queries in round trips"
printf '%-6s %-8s %12s %12s %12s\n' transport cond handshake query total
rtts() { # transport condition url flags...
  local name=$1 cond=$2 url=$3; shift 3
  "$DOXLAB" testbed exec --name "$tb" client -- "$DOXLAB" query --json --warmup --repeat "$N" --ca "$work/cert.pem" --sni dns.test "$@" "$url" example.test A |
    jq -rs --arg n "$name" --arg c "$cond" --argjson rtt "$rtt" '
      map(select(.warmup != true)) as $r
      | def med(f): ($r | map(f) | sort) as $s | ($s | length) as $n | if $n == 0 then null elif $n % 2 == 1 then $s[($n - 1) / 2] else ($s[$n / 2 - 1] + $s[$n / 2]) / 2 end;
      [$n, $c, med(.timing.handshake_ms)/$rtt, med(.timing.query_ms)/$rtt, med(.timing.total_ms)/$rtt] | @tsv' |
    awk -F'\t' '{printf "%-6s %-8s %12.2f %12.2f %12.2f\n",$1,$2,$3,$4,$5}'
}
rtts udp fresh udp://10.200.0.2
rtts tcp fresh tcp://10.200.0.2
for cond in fresh resumed; do
  flags=(); [ $cond = resumed ] && flags=(--resume)
  rtts dot  $cond tls://10.200.0.2 "${flags[@]}"
  rtts doh2 $cond https://10.200.0.2/dns-query "${flags[@]}"
  rtts doh3 $cond h3://10.200.0.2/dns-query "${flags[@]}"
  rtts doq  $cond quic://10.200.0.2 "${flags[@]}"
done
rtts doh3 0-rtt h3://10.200.0.2/dns-query --0rtt
rtts doq  0-rtt quic://10.200.0.2 --0rtt
echo "(expected from the protocols: UDP 1, TCP 2, DoT and DoH over TLS 1.3 3, DoQ and DoH/3 2, with 0-RTT 1)"

echo
echo "The dns-rtt experiment, quick: every access profile of Table II"
rm -rf demo-output && mkdir -p demo-output
"$DOXLAB" experiment dns-rtt --quick --store demo-output/doxlab.db 2>/dev/null

echo
echo "The web experiment, quick: Chromium loads the corpus pages over HTTP/3 (1-RTT and 0-RTT) on fiber and 4G"
echo "while its DNS goes through a doxlab stub over DoUDP, DoH and DoQ"
"$DOXLAB" experiment web --quick --store demo-output/doxlab.db 2>/dev/null

echo
echo "Pages as the web is: pages over 5, 20 and 45 origins on three servers at different distances, on fiber,"
echo "the stub's connection kept warm, as the DoH-cost paper's Firefox did (its Fig. 1 and Fig. 6)"
"$DOXLAB" experiment web --profiles fiber --pages o5,o20,o45 --transports udp,doh2 --stub warm --h3 1rtt --repeat 5 --store demo-output/doxlab.db 2>/dev/null

echo
echo "The same 20-origin page from one CDN edge on one certificate, in Chromium on fiber, with ORIGIN frames and without"
for frames in "" "--no-origin"; do
  # shellcheck disable=SC2086 # no flag, or one
  "$DOXLAB" experiment web --profiles fiber --pages o20 --transports udp,doh2 --h3 1rtt --placement cdn $frames --repeat 5 --store demo-output/doxlab.db 2>/dev/null
done

echo
echo "Coalescing, quick: doxlab's page loader with the page's DNS on its own connection, emulated as the paper did,"
echo "or on the page's own QUIC connection (DoH/3, DNS streams), on fiber and 4G"
"$DOXLAB" experiment coalescing --quick --store demo-output/doxlab.db 2>/dev/null

echo
echo "ORIGIN frames: the 20-origin page from one CDN edge that announces every origin, beside the same page"
echo "from a server per party, doxlab's loader on fiber with its DNS over DoUDP or DoQ"
for placement in "--placement cdn --origins" "--placement separate"; do
  # shellcheck disable=SC2086 # two flags in one word
  "$DOXLAB" experiment coalescing --profiles fiber --pages o20 --dns udp,doq --h3 1rtt $placement --repeat 5 --store demo-output/doxlab.db 2>/dev/null
done

echo
echo "Head-of-line blocking, quick: Poisson queries over one connection per transport, some answers delayed"
"$DOXLAB" experiment hol --quick --store demo-output/doxlab.db 2>/dev/null

echo
echo "QUIC's amplification limit, quick: DoQ handshakes with small and large certificate chains"
"$DOXLAB" experiment amplification --quick --store demo-output/doxlab.db 2>/dev/null

echo
echo "Octets per resolution by layer, quick: 10 names over each transport, captured at the link and decrypted"
"$DOXLAB" experiment overhead --quick --key-share classic --store demo-output/doxlab.db 2>/dev/null

echo
echo "The privacy ladder, quick: DoUDP, DoH, DoQ and Oblivious DoH lookups, a page over HTTP/3 in clear and with ECH, and doxlab's loader up to ODoH + ECH, on fiber"
"$DOXLAB" experiment privacy --quick --store demo-output/doxlab.db 2>/dev/null

echo
echo "doxlab serve under open-loop load, quick: 1000 to 4000 queries/s on every transport, every query stored"
"$DOXLAB" experiment server-load --quick --store demo-output/doxlab.db 2>/dev/null
"$DOXLAB" report --store demo-output/doxlab.db --out demo-output/report
echo
"$DOXLAB" report --store demo-output/doxlab.db --json | jq -r '.findings as $f
  | ($f | map(select(.verdict == "holds" or .verdict == "differs")) | length) as $earned
  | "The report checks \($f | length) of the papers'"'"' claims; the data earns a verdict on \($earned): " +
    ([$f[] | .verdict] | group_by(.) | map("\(length) \(.[0])") | join(", ")) + "."'
echo "Open demo-output/report/report.html; the samples are in demo-output/doxlab.db ('doxlab export --store demo-output/doxlab.db')."

echo
echo "One DoQ exchange in 0-RTT, in full:"
"$DOXLAB" query --warmup --0rtt --ca "$work/cert.pem" "quic://127.0.0.1:$pdoq" example.test A
echo "Loopback has no delay: the first two tables show mechanics (bytes, resumption, 0-RTT);"
echo "the testbed table shows what they cost on an access link."
