package measure_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/transport"
)

func TestLoadCampaignErrorsNameFileLineField(t *testing.T) {
	dir := t.TempDir()
	for body, want := range map[string]string{
		"targets: [10.0.0.1]\ntransports: [udp, smtp]\n":     "c.yaml:2: transports: unknown transport \"smtp\"",
		"name: x\ntargets: [10.0.0.1]\nconditions: [warm]\n": "c.yaml:3: conditions: unknown condition",
		"name: x\n":                                                               "c.yaml: targets: no targets",
		"targets: [\"not a host\"]\n":                                             "c.yaml:1: targets:",
		"targets: [10.0.0.1]\nquery: {type: NOPE}\n":                              "c.yaml:2: query: unknown record type",
		"targets: [10.0.0.1]\nretries: 99\n":                                      "c.yaml:2: retries:",
		"targets: [10.0.0.1]\ntransport: [udp]\n":                                 "line 2: field transport not found",
		"targets: [10.0.0.1]\ntimeout: soon\n":                                    "c.yaml: line 2",
		"targets: [10.0.0.1]\ntls: {ca: /nonexistent.pem}\n":                      "c.yaml:2: tls: ca:",
		"targets: [10.0.0.1]\nvantages: [{name: Frankfurt}]\n":                    "c.yaml:2: vantages: vantage name \"Frankfurt\"",
		"targets: [10.0.0.1]\nvantages: [{name: a}, {name: a}]\n":                 "c.yaml:2: vantages: \"a\" named twice",
		"vantages: [{name: a, targets: [1.2.3.4]}, {name: b}]\n":                  "c.yaml: targets: no targets",
		"targets: [10.0.0.1]\nvantages: [{name: a, asn: -1}]\n":                   "negative asn",
		"targets: [10.0.0.1]\nvantages: [{name: a}]\nrounds: 4\n":                 "c.yaml:3: rounds: 4 rounds need every",
		"targets: [10.0.0.1]\nvantages: [{name: a}]\nevery: 48h\n":                "c.yaml:3: every: say how many rounds",
		"targets: [10.0.0.1]\nevery: 48h\nrounds: 4\n":                            "rounds are planned for workers",
		"targets: [10.0.0.1]\nvantages: [{name: a}]\nevery: 1h\nrounds: 100000\n": "rounds: 100000 is not 1..1000",
	} {
		p := filepath.Join(dir, "c.yaml")
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		_, err := measure.LoadCampaign(p)
		require.ErrorContains(t, err, want, body)
	}
	p := filepath.Join(dir, "ok.yaml")
	require.NoError(t, os.WriteFile(p, []byte("name: ok\ntargets: [10.0.0.1, \"quic://[::1]:853\"]\ntransports: [doq]\nconditions: [pam]\nquery: {name: test.com, type: AAAA, rd: false}\nrepeat: 2\ntimeout: 2s\nretries: 1\n"), 0o644))
	c, err := measure.LoadCampaign(p)
	require.NoError(t, err)
	require.Equal(t, 2*time.Second, c.Timeout)
	require.False(t, *c.Query.RD)
}

// TestRetries: a server that drops everything gets the task retried, and
// the sample says how many attempts it took.
func TestRetries(t *testing.T) {
	srv, err := server.New(&server.Config{Listen: server.Listen{UDP: "127.0.0.1:0"}, Answers: server.Answers{Any: "192.0.2.1"}, Faults: server.Faults{DropProbability: 1}})
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	defer srv.Close()
	var got []*measure.Sample
	var progress []int
	err = measure.Run(context.Background(), measure.Spec{Targets: []string{"udp://" + srv.Addr("udp").String()}, Timeout: 200 * time.Millisecond, Retries: 2,
		Progress: func(done, total int) { progress = append(progress, done, total) }}, func(x *measure.Sample) { got = append(got, x) })
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, 3, got[0].Attempts)
	require.Equal(t, transport.StatusTimeout, got[0].Status)
	require.Equal(t, []int{1, 1}, progress)
}

func TestExampleCampaign(t *testing.T) {
	c, err := measure.LoadCampaign("../examples/campaign.yaml")
	require.NoError(t, err)
	require.Equal(t, "pam-resolvers", c.Name)
	require.Len(t, c.Conditions, 4)
}

func TestExampleVantagesCampaign(t *testing.T) {
	c, err := measure.LoadCampaign("../examples/campaign-vantages.yaml")
	require.NoError(t, err)
	require.Len(t, c.Vantages, 3)
	require.Equal(t, 3320, c.Vantages[0].ASN)
	require.Equal(t, []string{"10.200.0.3"}, c.Vantages[2].Targets, "a vantage point with resolvers of its own")
}
