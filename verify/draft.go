package verify

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
)

//go:embed draft/doq_draft_client.py
var draftClient []byte

// DraftPython is the Python with aioquic 0.9.25, the last QUIC stack
// here that speaks drafts 29-32 (scripts/install-peers.sh installs it).
var DraftPython = "/opt/doxlab-peers/aioquic-drafts/bin/python"

// isDraft reports whether a Version Negotiation entry is an IETF draft
// (0xff0000xx).
func isDraft(v string) bool {
	n, err := strconv.ParseUint(strings.TrimPrefix(v, "0x"), 16, 32)
	return err == nil && n>>8 == 0xff0000
}

// tryDrafts completes a DoQ exchange over the drafts the server offered,
// through aioquic 0.9.25.
func tryDrafts(ctx context.Context, target string, o Options, r *DoQ) bool {
	var drafts []string
	for _, v := range r.Offered {
		if isDraft(v) {
			drafts = append(drafts, strings.TrimPrefix(v, "0x"))
		}
	}
	if len(drafts) == 0 {
		return false
	}
	host, port, _ := net.SplitHostPort(target)
	// The script goes in on stdin ("-"), so no file outlives the run.
	argv := append([]string{DraftPython, "-", host, port, o.Name, strconv.FormatFloat(o.Timeout.Seconds(), 'f', 1, 64)}, drafts...)
	var cmd *exec.Cmd
	if o.Command != nil {
		cmd = o.Command(argv...)
	} else {
		cmd = exec.CommandContext(ctx, argv[0], argv[1:]...)
	}
	cmd.Stdin = bytes.NewReader(draftClient)
	out, err := cmd.Output()
	if err != nil {
		r.Error = fmt.Sprintf("draft versions offered, but the draft client failed (%v; is %s installed?)", err, DraftPython)
		return false
	}
	var res struct{ Version, ALPN, Rcode, Error string }
	if err := json.Unmarshal(out, &res); err != nil {
		r.Error = fmt.Sprintf("draft client: %v", err)
		return false
	}
	if res.Version != "" {
		r.QUICVersion, r.ALPN = res.Version, res.ALPN
	}
	if res.Error != "" {
		r.Error = "over " + strings.Join(drafts, ",") + ": " + res.Error
		if res.ALPN != "" {
			r.Verdict = "handshake-only"
		}
		return false
	}
	r.Verdict, r.Rcode, r.Error = "doq", res.Rcode, ""
	return true
}
