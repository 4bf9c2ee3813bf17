package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/campaign"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/testbed"
)

// TestImages runs each image's worker as a container in a vantage host
// of the testbed, against a coordinator PostgreSQL in another, and
// completes a small campaign with it: DNS exchanges with the doxlab image
// (as its own non-root user), page loads with doxlab-chromium (root in
// the container, which confines Chromium as in the wild: its own user,
// its sandbox, its own network). Containers run with runc on the images'
// unpacked OCI bundles: podman's runtime sets resource limits, which
// this sandbox refuses, and no daemon is needed. The container shares
// its host's network, as a worker's pod or VM does; the page worker gets
// the capabilities docs/campaigns.md names.
func TestImages(t *testing.T) {
	testutil.NeedRoot(t, "the testbed needs root")
	t.Parallel() // on a testbed of its own, beside the other experiments
	runc := testutil.Need(t, "runc", "apt-get install runc")
	umoci := testutil.Need(t, "umoci", "apt-get install umoci")
	images, _ := filepath.Abs("../../dist/images")
	for _, img := range []string{"doxlab", "doxlab-chromium"} {
		if _, err := os.Stat(filepath.Join(images, img+".oci.tar")); err != nil {
			testutil.Missing(t, "no image "+img+": make images first")
		}
	}
	dir := t.TempDir()
	bin := testutil.Doxlab(t)
	tb, err := testbed.Start(testbed.Spec{Name: "images", Hosts: []string{"db", "resolver", "web", "vpdns", "vppage"}})
	require.NoError(t, err)
	defer tb.Close()
	pg := testutil.NewPostgres(t, tb.IP("db").String(), func(argv ...string) *exec.Cmd { return tb.Command("db", argv...) })

	// The resolver answers the page's name with the web host, anything
	// else with a documentation address; the web host serves the page.
	zone := filepath.Join(dir, "test.zone")
	require.NoError(t, os.WriteFile(zone, []byte(fmt.Sprintf("$ORIGIN test.\n@ 300 IN SOA ns.test. h.test. 1 60 60 60 60\npage 300 IN A %s\n", tb.IP("web"))), 0o644))
	srv, err := server.StartIn(&server.Config{Listen: server.Listen{UDP: tb.IP("resolver").String() + ":53", TCP: tb.IP("resolver").String() + ":53"},
		Answers: server.Answers{Zone: zone, Origin: "test.", Any: "192.0.2.7"}}, func(f func() error) error { return tb.Run("resolver", f) })
	require.NoError(t, err)
	defer srv.Close()
	site := filepath.Join(dir, "site")
	require.NoError(t, os.MkdirAll(site, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(site, "index.html"), []byte("<!doctype html><title>image</title><p>served to a container's browser"), 0o644))
	web := tb.Command("web", "python3", "-m", "http.server", "80", "--bind", tb.IP("web").String(), "--directory", site)
	require.NoError(t, web.Start())
	defer func() { web.Process.Kill(); web.Wait() }()

	plan := func(name, body string) {
		spec := filepath.Join(dir, name+".yaml")
		require.NoError(t, os.WriteFile(spec, []byte(body), 0o644))
		out, err := tb.Command("db", bin, "campaign", "plan", spec, "--store", pg.URL).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	plan("dns", fmt.Sprintf("name: dns\ntargets: [%s]\nallow_special: [10.200.0.0/24]\ntransports: [udp, tcp]\nconditions: [fresh]\nrepeat: 5\ntimeout: 2s\nvantages: [{name: vpdns}]\n", tb.IP("resolver")))
	plan("pages", fmt.Sprintf("name: pages\ntargets: [%s]\nallow_special: [10.200.0.0/24]\ntransports: [udp]\npages: {urls: [http://page.test/], timeout: 10s}\ncontact: https://lab.example/doxlab-test\nrepeat: 2\nvantages: [{name: vppage}]\n", tb.IP("resolver")))

	runcRoot := filepath.Join(dir, "runc")
	run := func(image, host string, page bool, args ...string) string {
		bundle := unpack(t, umoci, filepath.Join(images, image+".oci.tar"), filepath.Join(dir, image))
		configure(t, bundle, page, "/run/netns/"+tb.NS[host], args)
		// runc runs here, not in the host (ip netns exec hides the
		// cgroup mounts), and puts the container in the host's network.
		cmd := exec.Command(runc, "--root", runcRoot, "run", "--bundle", bundle, image)
		done := make(chan struct{})
		var out []byte
		go func() { out, err = cmd.CombinedOutput(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			exec.Command(runc, "--root", runcRoot, "kill", image, "KILL").Run()
			<-done
			t.Fatalf("%s's worker did not drain its queue in 2 minutes: %s", image, out)
		}
		require.NoError(t, err, "%s: %s", image, out)
		return string(out)
	}
	out := run("doxlab", "vpdns", false, "worker", "--vantage", "vpdns", "--store", pg.URL, "--drain", "--quiet")
	t.Logf("doxlab image: %s", lastLine(out))
	out = run("doxlab-chromium", "vppage", true, "worker", "--vantage", "vppage", "--store", pg.URL, "--concurrency", "1", "--drain")
	t.Logf("doxlab-chromium image: %s", out)

	st, err := tb.Command("db", bin, "campaign", "status", "--json", "--store", pg.URL).Output()
	require.NoError(t, err)
	var status campaign.Status
	require.NoError(t, json.Unmarshal(st, &status))
	require.Equal(t, "pages", status.Name, "the last planned")
	require.Equal(t, 2, status.Vantages[0].Stored)
	require.Equal(t, 2, status.Vantages[0].Planned)
	loads, err := tb.Command("db", bin, "export", "--table", "campaign-loads", "--store", pg.URL).Output()
	require.NoError(t, err)
	require.Equal(t, 3, strings.Count(string(loads), "\n"), "a header and two loads: %s", loads)
	require.Equal(t, 2, strings.Count(string(loads), ",ok,"), "both loads ok: %s", loads)
	samples, err := tb.Command("db", bin, "export", "--store", pg.URL).Output()
	require.NoError(t, err)
	require.Equal(t, 11, strings.Count(string(samples), "\n"), "a header and ten DNS samples")
}

// unpack makes an OCI runtime bundle of an image archive.
func unpack(t *testing.T, umoci, archive, dir string) string {
	t.Helper()
	layout := dir + "-layout"
	require.NoError(t, os.MkdirAll(layout, 0o755))
	out, err := exec.Command("tar", "-xf", archive, "-C", layout).CombinedOutput()
	require.NoError(t, err, "%s", out)
	var index struct {
		Manifests []struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	require.NoError(t, json.Unmarshal(must(os.ReadFile(filepath.Join(layout, "index.json"))), &index))
	ref := index.Manifests[0].Annotations["org.opencontainers.image.ref.name"]
	out, err = exec.Command(umoci, "unpack", "--image", layout+":"+ref, dir).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return dir
}

// configure sets a bundle's command and puts it in netns, its host's
// network; a
// page worker's gets every capability and a writable /proc/sys (its
// browser's network namespace, nftables, IPv4 forwarding) and no
// seccomp filter of the runtime's (Chromium makes its own sandbox's).
// Resource limits are left as they are: this sandbox refuses to set any.
func configure(t *testing.T, bundle string, page bool, netns string, args []string) {
	t.Helper()
	path := filepath.Join(bundle, "config.json")
	var c map[string]any
	require.NoError(t, json.Unmarshal(must(os.ReadFile(path)), &c))
	proc := c["process"].(map[string]any)
	proc["args"] = append([]any{"/usr/local/bin/doxlab"}, anys(args)...)
	proc["terminal"] = false
	delete(proc, "rlimits")
	linux := c["linux"].(map[string]any)
	for _, n := range linux["namespaces"].([]any) {
		if n := n.(map[string]any); n["type"] == "network" {
			n["path"] = netns
		}
	}
	if page {
		var all []any
		for _, cap := range []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP",
			"CAP_NET_BIND_SERVICE", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_SYS_ADMIN", "CAP_SYS_CHROOT"} {
			all = append(all, cap)
		}
		proc["capabilities"] = map[string]any{"bounding": all, "effective": all, "permitted": all}
		delete(linux, "readonlyPaths")
		delete(linux, "maskedPaths")
		delete(linux, "seccomp")
		c["mounts"] = append(c["mounts"].([]any), map[string]any{"destination": "/run", "type": "tmpfs", "source": "tmpfs", "options": []any{"nosuid", "nodev", "mode=755"}})
	}
	b, err := json.MarshalIndent(c, "", " ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

func anys(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
