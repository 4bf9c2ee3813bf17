"""An independent DNS client for doxlab's server tests: dnspython (PyPI)
over DoQ, DoH/2 and DoH/3. Prints 'RCODE ANSWER...' for one query."""
import sys

import dns.message
import dns.query
import dns.rcode

proto, host, port, name, ca = sys.argv[1:6]
port = int(port)
q = dns.message.make_query(name, "A")
if proto == "doq":
    r = dns.query.quic(q, host, port=port, verify=ca, server_hostname="localhost", timeout=5)
elif proto in ("doh2", "doh3"):
    version = dns.query.HTTPVersion.H3 if proto == "doh3" else dns.query.HTTPVersion.H2
    r = dns.query.https(q, f"https://{host}:{port}/dns-query", verify=ca, http_version=version, timeout=5)
else:
    sys.exit(f"unknown protocol {proto}")
print(dns.rcode.to_text(r.rcode()), *[rr.to_text() for rrset in r.answer for rr in rrset])
