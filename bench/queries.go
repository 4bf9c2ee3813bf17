package bench

import (
	"fmt"
	"strings"

	"github.com/miekg/dns"

	"github.com/doxlab/doxlab/internal/dnswire"
	"github.com/doxlab/doxlab/internal/listfile"
)

// ReadQueries reads a query mix in dnsperf's format: NAME TYPE per line,
// # for comments; a name alone asks for A, a type by its mnemonic or as
// RFC 3597's TYPEnnn. An error names file and line.
func ReadQueries(path string) ([]Query, error) {
	var out []Query
	err := listfile.Each(path, func(_ int, line string) error {
		fields := strings.Fields(line)
		q := Query{Name: dns.Fqdn(fields[0]), Type: dns.TypeA}
		if len(fields) > 1 {
			t, ok := dnswire.ParseType(fields[1])
			if !ok {
				return fmt.Errorf("unknown type %q", fields[1])
			}
			q.Type = t
		}
		if len(q.Name) > 255 { // said, not quoted: it may be a megabyte
			return fmt.Errorf("a name of %d octets (DNS allows 255)", len(q.Name))
		}
		if _, ok := dns.IsDomainName(q.Name); !ok {
			return fmt.Errorf("%q is not a domain name", fields[0])
		}
		out = append(out, q)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no queries", path)
	}
	return out, nil
}
