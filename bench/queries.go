package bench

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/miekg/dns"
)

// ReadQueries reads a query mix in dnsperf's format: NAME TYPE per line,
// # for comments; a name alone asks for A, a type by its mnemonic or as
// RFC 3597's TYPEnnn. An error names file and line.
func ReadQueries(path string) ([]Query, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Query
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if n == 1 {
			line = strings.TrimPrefix(line, "\ufeff") // a byte order mark, as some editors save
		}
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		q := Query{Name: dns.Fqdn(fields[0]), Type: dns.TypeA}
		if len(fields) > 1 {
			t, ok := queryType(fields[1])
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
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no queries", path)
	}
	return out, nil
}

// queryType is a type's number from its mnemonic (A, HTTPS) or from
// RFC 3597's generic TYPEnnn, in any case.
func queryType(s string) (uint16, bool) {
	s = strings.ToUpper(s)
	if t, ok := dns.StringToType[s]; ok {
		return t, true
	}
	if digits, ok := strings.CutPrefix(s, "TYPE"); ok {
		if t, err := strconv.ParseUint(digits, 10, 16); err == nil {
			return uint16(t), true
		}
	}
	return 0, false
}
