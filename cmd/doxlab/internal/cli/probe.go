package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/doxlab/doxlab/probe"
	"github.com/doxlab/doxlab/transport"
)

// maxProbes bounds probe's --count: a liveness check, not a load.
const maxProbes = 10_000

// runProbe measures the RTT on the port and protocol a server URL uses:
// udp:// with a header-only DNS message, tcp://, tls:// and https:// with
// a SYN, quic:// and h3:// with a QUIC Version Negotiation.
func runProbe(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print one JSON object per probe")
	count := fs.Int("count", 1, "number of probes")
	timeout := fs.Duration("timeout", 3*time.Second, "bound on each probe")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: doxlab probe [--json] [--count N] [--timeout D] URL")
		fs.PrintDefaults()
	}
	pos, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil || len(pos) != 1 {
		if err == nil {
			fs.Usage()
		}
		return exitUsage
	}
	if *count < 1 || *count > maxProbes {
		// 0 and negatives once ran one probe; a typo's billion ran
		// until killed.
		fmt.Fprintf(stderr, "doxlab probe: --count %d: want 1 to %d\n", *count, maxProbes)
		return exitUsage
	}
	if *timeout <= 0 {
		// Every probe would have timed out at once, and said so.
		fmt.Fprintf(stderr, "doxlab probe: --timeout %v: want a positive duration\n", *timeout)
		return exitUsage
	}
	ep, err := transport.ParseURL(pos[0])
	if err != nil {
		fmt.Fprintf(stderr, "doxlab probe: %v\n", err)
		return exitUsage
	}
	f := probe.ForScheme(ep.Scheme)
	addr := net.JoinHostPort(ep.Host, strconv.Itoa(ep.Port))
	code := exitOK
	for range *count {
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		r, err := f(ctx, addr)
		cancel()
		if err != nil {
			fmt.Fprintf(stderr, "doxlab probe: %v\n", err)
			code = queryExit[transport.Classify(err)]
			if code == 0 {
				code = queryExit[transport.StatusTimeout]
			}
			continue
		}
		if *asJSON {
			json.NewEncoder(stdout).Encode(map[string]any{"kind": r.Kind, "target": r.Target, "rtt_ms": r.RTTMs(), "versions": hexVersions(r.Versions)})
			continue
		}
		fmt.Fprintf(stdout, "%s %s rtt %.3f ms", r.Kind, r.Target, r.RTTMs())
		if len(r.Versions) > 0 {
			fmt.Fprintf(stdout, "  versions %v", hexVersions(r.Versions))
		}
		fmt.Fprintln(stdout)
	}
	return code
}

func hexVersions(vs []uint32) []string {
	out := []string{}
	for _, v := range vs {
		out = append(out, fmt.Sprintf("0x%08x", v))
	}
	return out
}
