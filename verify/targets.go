package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/doxlab/doxlab/internal/listfile"
	"github.com/doxlab/doxlab/internal/suggest"
	"github.com/doxlab/doxlab/scan"
	"github.com/doxlab/doxlab/store"
)

// Target is a candidate as verified: an IP:PORT, with port added to a
// bare IP.
func Target(s string, port int) (string, error) {
	s = strings.TrimSpace(s)
	// netip, not net.SplitHostPort, which takes any text with a colon
	// (ftp://x is host "ftp", port "//x").
	if ap, err := netip.ParseAddrPort(s); err == nil && ap.Port() != 0 {
		return ap.String(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return "", fmt.Errorf("%q is not an IP address or IP:PORT", s)
	}
	if port < 1 || port > 65535 {
		return "", fmt.Errorf("port %d is not a port (1-65535)", port)
	}
	return netip.AddrPortFrom(a, uint16(port)).String(), nil
}

// headers are the first lines of a CSV of targets that name its columns
// (ZMap's saddr): a first line of one column is a target unless it is
// one of them, so that a name or a typo there is said, not skipped.
var headers = map[string]bool{"saddr": true, "ip": true, "address": true, "addr": true, "target": true, "host": true}

// ReadTargets reads candidates, one IP or IP:PORT per line, port added
// to bare IPs. Blank lines, # comments and a CSV header are skipped, and
// ZMap's saddr,sport CSV works. An error names the file and line.
func ReadTargets(path string, port int) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readTargets(f, path, port)
}

func readTargets(r io.Reader, path string, port int) ([]string, error) {
	var out []string
	err := listfile.EachIn(r, path, func(n int, line string) error {
		cols := strings.Split(line, ",")
		line = strings.TrimSpace(cols[0])
		if n == 1 && net.ParseIP(line) == nil && (len(cols) > 1 || headers[strings.ToLower(line)]) {
			return nil // a CSV header
		}
		if len(cols) > 1 && net.ParseIP(line) != nil { // ZMap's saddr,sport
			sport := strings.TrimSpace(cols[1])
			p, err := strconv.Atoi(sport)
			if err != nil || p < 1 || p > 65535 {
				return fmt.Errorf("sport %q is not a port (1-65535)", sport)
			}
			line = net.JoinHostPort(line, strconv.Itoa(p))
		}
		t, err := Target(line, port)
		if err != nil {
			return err
		}
		out = append(out, t)
		return nil
	})
	return out, err
}

// ScanTargets are the QUIC services the stored scan run runID found: that
// run alone (a prefix of its ID would merge every scan it begins), and
// one the store does not hold as a scan is an error naming the closest
// scans it does.
func ScanTargets(ctx context.Context, st *store.Store, runID string) ([]string, error) {
	runs, err := st.Runs(ctx)
	if err != nil {
		return nil, err
	}
	var scans []string
	found := false
	for _, r := range runs {
		if r.Kind == scan.RunKind {
			scans = append(scans, r.ID)
			found = found || r.ID == runID
		}
	}
	if !found {
		return nil, fmt.Errorf("no scan run %q in the store%s", runID, suggest.Closest(runID, scans))
	}
	var out []string
	err = st.FilteredResults(ctx, store.Filter{Runs: []string{runID}, Superseded: true}, scan.KindResult, func(_ string, raw []byte) error {
		var r scan.Result
		if err := json.Unmarshal(raw, &r); err != nil {
			return err
		}
		if r.Kind == "quic" {
			out = append(out, r.Target)
		}
		return nil
	})
	return out, err
}
