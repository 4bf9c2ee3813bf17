package measure

import "github.com/doxlab/doxlab/transport"

// Resolvers names the resolver behind each target URL: the URLs of one
// host are one resolver, speaking their transports, named by the host
// (an ODoH URL's target's, not its proxy's: Endpoint.Resolver);
// where two URLs of a host speak the same transport (two servers behind
// one address, on other ports) each URL is a resolver of its own, named
// by itself. Targets that do not parse are their own resolver. transport
// is each target's transport as measured.
func Resolvers(targets []string, transportOf func(target string) string) map[string]string {
	type seen struct{ transports map[string]int }
	hosts := map[string]*seen{}
	hostOf := map[string]string{}
	for _, t := range targets {
		ep, err := transport.ParseURL(t)
		if err != nil {
			continue
		}
		host := ep.Resolver()
		hostOf[t] = host
		h := hosts[host]
		if h == nil {
			h = &seen{transports: map[string]int{}}
			hosts[host] = h
		}
		h.transports[transportOf(t)]++
	}
	out := make(map[string]string, len(targets))
	for _, t := range targets {
		host, ok := hostOf[t]
		out[t] = t
		if !ok {
			continue
		}
		shared := false
		for _, n := range hosts[host].transports {
			shared = shared || n > 1
		}
		if !shared {
			out[t] = host
		}
	}
	return out
}
