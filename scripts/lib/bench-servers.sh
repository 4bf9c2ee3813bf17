# Sourced by the benchmark scripts: starts doxlab serve, CoreDNS, Unbound
# and Knot Resolver on loopback with static answers for *.example.test,
# one TLS identity, and writes a query file (bench_prelude sets up the
# rest). Pins the servers to $SERVER_CPUS when set (taskset).
#
# Ports: doxlab 2xxxx, CoreDNS 1xxxx, Unbound 3xxxx, Knot Resolver 4xxxx;
# x5300 Do53, x8853 DoT (and DoQ on UDP, doxlab only), x8443 DoH (and
# DoH/3 on UDP, doxlab only).
# BENCH_SERVERS picks some of them: BENCH_SERVERS="coredns unbound".
# shellcheck disable=SC2206
SERVERS=(${BENCH_SERVERS:-doxlab coredns unbound knot-resolver})
declare -A BASE=([doxlab]=20000 [coredns]=10000 [unbound]=30000 [knot-resolver]=40000)

# pin_servers CMD...: run as (pin_servers CMD) & so that the job is the
# server itself, which the caller's 'kill $(jobs -p)' reaches.
# split_cpus: load generators on CLIENT_CPUS, servers on SERVER_CPUS
# (defaults: CPU 0 and CPU 1 on a machine with two or more), so that a
# generator cannot take its server's core. Call it before bench_prelude.
split_cpus() {
  if [ "$(nproc)" -ge 2 ]; then CLIENT_CPUS=${CLIENT_CPUS-0}; SERVER_CPUS=${SERVER_CPUS-1}; fi
  export SERVER_CPUS
}
pin_client() { if [ -n "${CLIENT_CPUS:-}" ]; then taskset -c "$CLIENT_CPUS" "$@"; else "$@"; fi; }
pin_servers() { if [ -n "${SERVER_CPUS:-}" ]; then exec taskset -c "$SERVER_CPUS" "$@"; else exec "$@"; fi; }

# bench_prelude TOOL...: checks the tools and the servers are installed,
# builds bin/doxlab, makes $work (removed on exit, the servers killed)
# and starts the servers.
bench_prelude() {
  for bin in "$@"; do
    command -v "$bin" >/dev/null || { echo "$0: $bin missing (make peers installs it)" >&2; exit 1; }
  done
  go build -o bin/doxlab ./cmd/doxlab
  work=$(mktemp -d)
  trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
  start_bench_servers
}

start_bench_servers() {
  for bin in coredns unbound kresd; do
    command -v "$bin" >/dev/null || { echo "$0: $bin missing (make peers installs it)" >&2; exit 1; }
  done
  for i in $(seq 10000); do echo "q$i.example.test A"; done > "$work/queries"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -keyout "$work/key.pem" \
    -out "$work/cert.pem" -subj /CN=dns.test -addext "subjectAltName=IP:127.0.0.1" 2>/dev/null

  (pin_servers bin/doxlab serve --udp 127.0.0.1:25300 --tcp 127.0.0.1:25300 --dot 127.0.0.1:28853 --doq 127.0.0.1:28853 \
    --doh 127.0.0.1:28443 --doh3 127.0.0.1:28443 --any 192.0.2.7 --cert "$work/cert.pem" --key "$work/key.pem" 2>/dev/null) &

  cat > "$work/Corefile" <<CORE
dns://.:15300 tls://.:18853 https://.:18443 {
  bind 127.0.0.1
  tls $work/cert.pem $work/key.pem
  template IN A example.test {
    answer "{{ .Name }} 300 IN A 192.0.2.7"
  }
}
CORE
  (cd "$work" && pin_servers coredns -conf Corefile >/dev/null 2>&1) &

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
  (pin_servers unbound -c "$work/unbound.conf") &

  mkdir -p "$work/kresd"
  cat > "$work/kresd.conf" <<KRES
net.listen('127.0.0.1', 45300, { kind = 'dns' })
net.listen('127.0.0.1', 48853, { kind = 'tls' })
net.listen('127.0.0.1', 48443, { kind = 'doh2' })
net.tls('$work/cert.pem', '$work/key.pem')
policy.add(policy.suffix(policy.ANSWER({ [kres.type.A] = { rdata = kres.str2ip('192.0.2.7'), ttl = 300 } }), { todname('example.test.') }))
KRES
  # Two processes, as Unbound has two threads.
  for _ in 1 2; do (pin_servers kresd --noninteractive -q -c "$work/kresd.conf" "$work/kresd" >/dev/null 2>&1) & done
  sleep 3
}

# port SERVER MODE: the server's port for udp, tcp, dot, doq, doh, doh3.
port() {
  case $2 in
    udp|tcp) echo $((BASE[$1] + 5300)) ;;
    dot|doq) echo $((BASE[$1] + 8853)) ;;
    doh|doh3) echo $((BASE[$1] + 8443)) ;;
  esac
}

# url SERVER MODE: doxlab's URL for the server's listener.
url() { # server mode
  local p; p=$(port "$1" "$2")
  case $2 in
    udp) echo "udp://127.0.0.1:$p" ;; tcp) echo "tcp://127.0.0.1:$p" ;; dot) echo "tls://127.0.0.1:$p" ;;
    doh) echo "https://127.0.0.1:$p/dns-query" ;; doh3) echo "h3://127.0.0.1:$p/dns-query" ;; doq) echo "quic://127.0.0.1:$p" ;;
  esac
}

# doh_get_query: the base64url of a query for www.example.test A, ID 0.
doh_get_query() {
  printf '\0\0\1\0\0\1\0\0\0\0\0\0\3www\7example\4test\0\0\1\0\1' | base64 -w0 | tr '+/' '-_' | tr -d '='
}
