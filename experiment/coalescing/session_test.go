package coalescing

import (
	"context"
	"testing"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/transport"
)

// TestSessionDNSThatCannotBeMadeFails: a load's DNS transport that
// cannot be made (a name measure does not know) fails each of the
// load's lookups and HTTPS questions with why, the error classified as
// any transport's, and is made once per load: a failed cell is said,
// never a panic or a lookup that waits.
func TestSessionDNSThatCannotBeMadeFails(t *testing.T) {
	ctx := context.Background()
	d := &sessionDNS{e: &env{c: &Coalescing{}, ip: "127.0.0.1"}, name: "carrier-pigeon", tickets: newDNSTickets()}
	require.Equal(t, "carrier-pigeon", d.Label())
	_, look, err := d.Resolve(ctx, "a.doxlab.test")
	require.ErrorContains(t, err, "carrier-pigeon")
	require.NotNil(t, look, "the failed lookup is recorded")
	first := d.tr
	q := new(dns.Msg)
	q.SetQuestion("a.doxlab.test.", dns.TypeHTTPS)
	_, rec, err := d.Exchange(ctx, q)
	require.ErrorContains(t, err, "carrier-pigeon")
	require.Equal(t, first, d.tr, "made once for the load")
	r, ok := rec.(*transport.Record)
	require.True(t, ok, "the record is the transport's: %T", rec)
	require.NotEmpty(t, r.Status)
	require.Contains(t, r.Error, "carrier-pigeon")
	d.done()
	require.Nil(t, d.tr, "closed with the load")
	d.done()
}
