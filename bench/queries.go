package bench

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/miekg/dns"
)

// ReadQueries reads a query mix in dnsperf's format: NAME TYPE per line,
// # for comments; a name alone asks for A. An error names file and line.
func ReadQueries(path string) ([]Query, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Query
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		q := Query{Name: dns.Fqdn(fields[0]), Type: dns.TypeA}
		if len(fields) > 1 {
			t, ok := dns.StringToType[strings.ToUpper(fields[1])]
			if !ok {
				return nil, fmt.Errorf("%s:%d: unknown type %q", path, n, fields[1])
			}
			q.Type = t
		}
		if _, ok := dns.IsDomainName(q.Name); !ok {
			return nil, fmt.Errorf("%s:%d: %q is not a domain name", path, n, fields[0])
		}
		out = append(out, q)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no queries", path)
	}
	return out, nil
}
