// Package scan finds DNS services across address ranges the way the PAM
// 2022 paper found DoQ resolvers with ZMap: one QUIC Initial with a
// reserved version per address and port, whose Version Negotiation
// answer lists the versions the server offers, and for Do53 a
// header-only DNS message. Probes leave one socket at a global packet
// rate, in a random order over all targets; answers are validated
// statelessly (the connection IDs and DNS IDs are keyed hashes of the
// target), so nothing else is taken for a service.
package scan

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/doxlab/doxlab/internal/blocklist"
	"github.com/doxlab/doxlab/probe"
	"github.com/doxlab/doxlab/store"
)

// MaxTargets is the most address × port pairs a scan takes unless
// Spec.AllowLarge says otherwise: a /16 on one port.
const MaxTargets = 1 << 16

// MaxLargeTargets bounds even a scan with Spec.AllowLarge: its targets
// are held in memory, 48 octets each (800 MB at this bound, a /8 on one
// port). Past it, ZMap with ZMapProbe scans.
const MaxLargeTargets = 1 << 24

// ErrInternetWide is why a scan past MaxLargeTargets is refused: ZMap
// scans that far, with doxlab's probe (ZMapProbe).
var ErrInternetWide = errors.New("a scan of the Internet is ZMap's, with doxlab's probe")

// MaxDuration is the longest a scan's probes may take to send, at its
// rate.
const MaxDuration = 366 * 24 * time.Hour

// MaxRate is the highest packet rate accepted without Spec.AllowFast.
const MaxRate = 10000

// Spec is one scan.
type Spec struct {
	Ranges    []string // CIDR prefixes or addresses (IPv4); required
	QUICPorts []int    // default 784, 853, 8853 (the paper's)
	DNSPorts  []int    // Do53 over UDP; default none
	// Rate is the global packet rate, probes per second; required, at
	// most MaxRate unless AllowFast.
	Rate      float64
	Blocklist []string // files of prefixes never probed (one per line, # comments)
	OptOut    []string // files of prefixes whose owners asked not to be scanned; never probed either
	// Cooldown is how long to listen after the last probe. Default 2 s.
	Cooldown   time.Duration
	AllowLarge bool // more than MaxTargets targets
	AllowFast  bool // more than MaxRate probes per second
	// AllowSpecial are the special-purpose prefixes (RFC 6890: private,
	// loopback, link-local and cloud metadata, multicast, broadcast; a
	// testbed's 10.200.0.0/24) the scan may probe. Every other
	// special-purpose address in its ranges is skipped (Stats.Special),
	// as ZMap's default blocklist skips them; ranges that hold nothing
	// else are refused.
	AllowSpecial []string
}

// Result is one target's answer.
type Result struct {
	Target   string   `json:"target"` // ip:port
	Kind     string   `json:"kind"`   // quic or do53
	RTTMs    float64  `json:"rtt_ms"`
	Versions []string `json:"versions,omitempty"` // QUIC versions offered, as hex
	Rcode    string   `json:"rcode,omitempty"`    // Do53
}

// SpecError is a scan refused before anything was sent: bad input, not a
// failed scan. Field names the Spec field to set, where one would do.
type SpecError struct {
	Field string // "Rate", "AllowFast", "AllowLarge"; may be empty
	Err   error
}

func (e *SpecError) Error() string {
	if e.Field != "" {
		return e.Err.Error() + " (" + e.Field + ")"
	}
	return e.Err.Error()
}
func (e *SpecError) Unwrap() error { return e.Err }

// Stats is what the scan did.
type Stats struct {
	Targets, Blocked, Sent, Answers int
	// Special are the targets skipped for being special-purpose
	// addresses the spec does not allow (Spec.AllowSpecial).
	Special int
	// Unsent are the probes the system would not send (no route, a
	// firewall, a broadcast address), and UnsentWhy the first one's
	// reason, as "sendto: network is unreachable".
	Unsent    int
	UnsentWhy string
	Elapsed   time.Duration
	Rate      float64 // probes per second achieved
}

// ErrNothingSent is a scan none of whose probes the system sent.
var ErrNothingSent = errors.New("no probe could be sent")

// target is one probe to send.
type target struct {
	addr netip.AddrPort
	kind string
}

// Check says why a scan would be refused, before anything is sent or
// stored: the ranges, rate, ports and files plan reads, and the bounds
// on the targets' number and time. Errors are *SpecError.
func (s Spec) Check() error {
	_, _, err := s.bounds()
	return asSpecError(err)
}

// errAllSpecial is a scan whose every range is special-purpose and not
// allowed: there would be nothing to probe.
var errAllSpecial = errors.New("is special-purpose (RFC 6890) and not allowed: a scan probes a private, loopback, link-local or broadcast address only where the spec allows its block")

func asSpecError(err error) error {
	if _, ok := errors.AsType[*SpecError](err); err != nil && !ok {
		return &SpecError{Err: err}
	}
	return err
}

// bounds checks the spec and returns its prefixes and the blocklist,
// without expanding them: a /0 with AllowLarge is four billion
// addresses, refused here by number, not by running out of memory.
func (s *Spec) bounds() ([]netip.Prefix, *blocklist.Policy, error) {
	if len(s.Ranges) == 0 {
		return nil, nil, &SpecError{"Ranges", errors.New("no ranges given: scan scans only what it is told to")}
	}
	// NaN and Inf too: a probe's time is k/Rate seconds after the start,
	// and a rate no interval holds would send every probe at once.
	if !(s.Rate > 0) || math.IsInf(s.Rate, 0) {
		return nil, nil, &SpecError{"Rate", errors.New("a rate limit is required, a finite number of probes per second above 0")}
	}
	if s.Rate > MaxRate && !s.AllowFast {
		return nil, nil, &SpecError{"AllowFast", fmt.Errorf("rate %.0f/s is above %d/s: say so explicitly", s.Rate, MaxRate)}
	}
	if len(s.QUICPorts) == 0 && len(s.DNSPorts) == 0 {
		s.QUICPorts = []int{784, 853, 8853}
	}
	// A port given twice is probed once: twice would double what each
	// scanned host receives.
	s.QUICPorts, s.DNSPorts = slices.Compact(slices.Sorted(slices.Values(s.QUICPorts))), slices.Compact(slices.Sorted(slices.Values(s.DNSPorts)))
	for _, port := range slices.Concat(s.QUICPorts, s.DNSPorts) {
		if port < 1 || port > 65535 {
			return nil, nil, &SpecError{"", fmt.Errorf("port %d: want 1 to 65535", port)}
		}
	}
	block, err := blocklist.Read(append(slices.Clone(s.Blocklist), s.OptOut...)...)
	if err != nil {
		return nil, nil, err
	}
	var prefixes []netip.Prefix
	total := 0
	for _, r := range s.Ranges {
		p, err := parsePrefix(r)
		if err != nil {
			return nil, nil, err
		}
		prefixes = append(prefixes, p)
		total += (1 << (32 - p.Bits())) * (len(s.QUICPorts) + len(s.DNSPorts))
		if total > MaxTargets && !s.AllowLarge {
			return nil, nil, &SpecError{"AllowLarge", fmt.Errorf("the ranges make more than %d targets: say so explicitly", MaxTargets)}
		}
		if total > MaxLargeTargets {
			return nil, nil, &SpecError{"", fmt.Errorf("the ranges make more than %d targets, the most a scan holds: %w", MaxLargeTargets, ErrInternetWide)}
		}
	}
	// Bounded in time as in rate: past MaxDuration a probe's time would
	// be no duration at all (time.Duration holds 292 years, and a rate
	// of 1e-12 would wrap it to send at once). Reckoned on every target
	// the ranges make, the blocked ones too: a bound, not an estimate.
	if d := float64(total) / s.Rate; d > MaxDuration.Seconds() {
		return nil, nil, &SpecError{"Rate", fmt.Errorf("%d targets at %g probes per second take %.0f days, more than %.0f", total, s.Rate, d/86400, MaxDuration.Hours()/24)}
	}
	allow, err := blocklist.ParseAllow(s.AllowSpecial)
	if err != nil {
		return nil, nil, &SpecError{"AllowSpecial", err}
	}
	policy := &blocklist.Policy{Block: block, Allow: allow}
	// Refused here, without expanding them, where every range lies in a
	// special-purpose block not allowed; a range partly in one skips it.
	if i := slices.IndexFunc(prefixes, func(p netip.Prefix) bool { _, all := policy.RefusesAll(p); return !all }); i < 0 {
		sp, _ := policy.RefusesAll(prefixes[0])
		return nil, nil, &SpecError{"AllowSpecial", fmt.Errorf("range %s is in %s, %s, and %w", prefixes[0], sp.Prefix, sp.Name, errAllSpecial)}
	}
	return prefixes, policy, nil
}

// plan expands the ranges into targets, minus the blocked prefixes and
// the special-purpose addresses not allowed.
func (s *Spec) plan() (targets []target, blocked, special int, err error) {
	prefixes, policy, err := s.bounds()
	if err != nil {
		return nil, 0, 0, err
	}
	for _, p := range prefixes {
		mayBe := blocklist.IsSpecial(p) // else each address needs only the blocklist
		for a := p.Masked().Addr(); p.Contains(a); a = a.Next() {
			if policy.Block.Contains(a) {
				blocked += len(s.QUICPorts) + len(s.DNSPorts)
				continue
			}
			if mayBe && errors.Is(policy.Check(a), blocklist.ErrSpecial) {
				special += len(s.QUICPorts) + len(s.DNSPorts)
				continue
			}
			for _, port := range s.QUICPorts {
				targets = append(targets, target{netip.AddrPortFrom(a, uint16(port)), "quic"})
			}
			for _, port := range s.DNSPorts {
				targets = append(targets, target{netip.AddrPortFrom(a, uint16(port)), "do53"})
			}
		}
	}
	return targets, blocked, special, nil
}

func parsePrefix(r string) (netip.Prefix, error) {
	r = strings.TrimSpace(r)
	if !strings.Contains(r, "/") {
		a, err := netip.ParseAddr(r)
		if err != nil || !a.Is4() {
			return netip.Prefix{}, fmt.Errorf("range %q: not an IPv4 address or prefix", r)
		}
		return netip.PrefixFrom(a, 32), nil
	}
	p, err := netip.ParsePrefix(r)
	if err != nil || !p.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("range %q: not an IPv4 prefix", r)
	}
	return p.Masked(), nil
}

// permutation visits 0..n-1 once each in a random order without a table:
// i -> (a*i + b) mod p over a prime p >= n, skipping values >= n.
type permutation struct{ n, p, a, b, i, seen uint64 }

func newPermutation(n uint64) *permutation {
	p := new(big.Int).SetUint64(max(n, 2))
	for !p.ProbablyPrime(20) {
		p.Add(p, big.NewInt(1))
	}
	pp := p.Uint64()
	r := func(m uint64) uint64 { v, _ := rand.Int(rand.Reader, new(big.Int).SetUint64(m)); return v.Uint64() }
	return &permutation{n: n, p: pp, a: 1 + r(pp-1), b: r(pp)}
}

func (pm *permutation) next() (uint64, bool) {
	for pm.seen < pm.n && pm.i < pm.p {
		v := (pm.a*pm.i + pm.b) % pm.p
		pm.i++
		if v < pm.n {
			pm.seen++
			return v, true
		}
	}
	return 0, false
}

// Run scans and calls found for each validated answer, once per target.
func Run(ctx context.Context, s Spec, found func(Result)) (Stats, error) {
	targets, blocked, special, err := s.plan()
	if err != nil {
		return Stats{}, asSpecError(err)
	}
	if s.Cooldown <= 0 {
		s.Cooldown = 2 * time.Second
	}
	st := Stats{Targets: len(targets), Blocked: blocked, Special: special}
	conn, err := unicastUDP()
	if err != nil {
		return st, err
	}
	defer conn.Close()
	key := make([]byte, 32)
	rand.Read(key)
	var mu sync.Mutex
	sentAt := map[netip.AddrPort]time.Time{}
	seen := map[string]bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			n, from, err := conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			at := time.Now()
			from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
			r, ok := validate(key, from, buf[:n])
			if !ok {
				continue
			}
			mu.Lock()
			t0, sent := sentAt[from]
			dup := seen[r.Kind+" "+r.Target]
			seen[r.Kind+" "+r.Target] = true
			if sent && !dup {
				st.Answers++
			}
			mu.Unlock()
			if sent && !dup {
				r.RTTMs = float64(at.Sub(t0).Microseconds()) / 1000
				found(r)
			}
		}
	}()
	start := time.Now()
	interval := time.Duration(float64(time.Second) / s.Rate)
	perm := newPermutation(uint64(len(targets)))
	for k := 0; ; k++ {
		i, ok := perm.next()
		if !ok {
			break
		}
		// Paced against the start, so the average rate holds exactly and
		// a late wake-up never lets a burst exceed it by more than one.
		if d := time.Until(start.Add(time.Duration(k) * interval)); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				conn.Close()
				<-done
				return st, ctx.Err()
			}
		}
		t := targets[i]
		pkt := probeFor(key, t)
		mu.Lock()
		sentAt[t.addr] = time.Now()
		mu.Unlock()
		if _, err := conn.WriteToUDPAddrPort(pkt, t.addr); err != nil {
			if st.Unsent++; st.UnsentWhy == "" {
				st.UnsentWhy = sendError(err)
			}
			continue
		}
		st.Sent++
	}
	sendTime := time.Since(start)
	select {
	case <-time.After(s.Cooldown):
	case <-ctx.Done():
	}
	conn.Close()
	<-done
	st.Elapsed = time.Since(start)
	if sendTime > 0 && st.Sent > 1 {
		st.Rate = float64(st.Sent-1) / sendTime.Seconds()
	}
	if st.Sent == 0 && st.Unsent > 0 && ctx.Err() == nil {
		return st, fmt.Errorf("%w: %d tried, the first refused with %s", ErrNothingSent, st.Unsent, st.UnsentWhy)
	}
	return st, ctx.Err()
}

// unicastUDP is the scan's socket, which sends to one host a probe: a
// range holds its subnets' broadcast addresses (and may be
// 255.255.255.255), and a probe to one would reach every host of the
// vantage point's link. The system refuses such a send (Stats.Unsent).
func unicastUDP() (*net.UDPConn, error) {
	conn, err := net.ListenUDP("udp4", nil)
	if err != nil {
		return nil, err
	}
	rc, err := conn.SyscallConn()
	if err == nil {
		cerr := rc.Control(func(fd uintptr) { err = setUnicast(fd) })
		err = errors.Join(cerr, err)
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("a socket that does not broadcast: %w", err)
	}
	return conn, nil
}

// sendError is why a probe was not sent, without its address, so that
// probes refused alike say so alike.
func sendError(err error) string {
	if oe, ok := errors.AsType[*net.OpError](err); ok {
		return oe.Err.Error()
	}
	return err.Error()
}

// ids derives a target's connection IDs (or DNS ID) from the scan key, so
// answers are checked without remembering what was sent.
func ids(key []byte, a netip.AddrPort) (dcid, scid []byte) {
	m := hmac.New(sha256.New, key)
	b, _ := a.MarshalBinary()
	m.Write(b)
	sum := m.Sum(nil)
	return sum[:8], sum[8:16]
}

func probeFor(key []byte, t target) []byte {
	dcid, scid := ids(key, t.addr)
	if t.kind == "quic" {
		return probe.VNProbeWith(dcid, scid)
	}
	msg := make([]byte, 12) // a header alone; servers answer FORMERR
	copy(msg[:2], dcid[:2])
	return msg
}

// validate checks an answer against the probe its source would have got.
func validate(key []byte, from netip.AddrPort, b []byte) (Result, bool) {
	dcid, scid := ids(key, from)
	if vs, err := probe.ParseVN(b, dcid, scid); err == nil {
		r := Result{Target: from.String(), Kind: "quic"}
		for _, v := range vs {
			r.Versions = append(r.Versions, fmt.Sprintf("0x%08x", v))
		}
		return r, true
	}
	if len(b) >= 12 && b[0] == dcid[0] && b[1] == dcid[1] && b[2]&0x80 != 0 {
		rcodes := map[uint8]string{0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED"}
		rc, ok := rcodes[b[3]&0x0f]
		if !ok {
			rc = fmt.Sprint(b[3] & 0x0f)
		}
		return Result{Target: from.String(), Kind: "do53", Rcode: rc}, true
	}
	return Result{}, false
}

// ZMapProbe is the QUIC probe for ZMap's UDP module (--probe-module=udp
// --probe-args=file:FILE): fixed connection IDs, so `doxlab verify` can
// check the answers ZMap records.
func ZMapProbe() []byte {
	dcid, scid := ZMapIDs()
	return probe.VNProbeWith(dcid, scid)
}

// ZMapIDs are the connection IDs of ZMapProbe.
func ZMapIDs() (dcid, scid []byte) {
	return []byte("doxlab-d"), []byte("doxlab-s")
}

// KindResult is a Result in the store.
var KindResult = store.NewKind("scan")

// RunKind is the kind of a scan's run in the store, which verify's
// --scan-run reads the results of.
const RunKind = "scan"

// Save stores one result of a scan run, keyed by its kind and target.
func Save(ctx context.Context, st *store.Store, runID string, r Result) error {
	return st.WriteResult(ctx, runID, KindResult, r.Kind+" "+r.Target, time.Now(), r)
}
