package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/doxlab/doxlab/figure"
	"github.com/doxlab/doxlab/testbed"
)

const testbedUsage = `usage: doxlab testbed COMMAND [flags]

  up      [--name N] [--hosts client,server] [--profile P] [--host-profile HOST=P] [--pcap DIR] [--backend B]
          create the hosts (network namespaces) and start the link emulator; idempotent
  down    [--name N]      stop the emulator and remove everything, also after a crash
  status  [--name N]      hosts, addresses, profiles and the emulator's counters
  exec    [--name N] HOST -- CMD [ARGS]   run a command inside a host
  profile [--name N] [--host HOST] P      switch a host's access link (default: the first host)
  check   [--profiles fiber,dsl,...] [--probes N] [--cpu-load N] [--browser-load] [--backend B] [--low-latency]
          measure RTT error, throughput and the emulator's CPU on a scratch testbed
  trace   show TRACE | convert LOG | gen MODEL   Mahimahi delivery-opportunity traces (docs/testbed.md)
  bloat   [--profiles P,...] [--duration 10s] [--figure FILE.png]
          the RTT while one TCP download fills the client's downlink: what its queue (tail, codel, fq_codel, pie) does

Profiles: none, fiber, cable, dsl, 4g, 4g-medium (the cross-layer paper's Table II), or a YAML file.
Variants follow a "+" and combine (dsl+bulk+fq_codel): lossN, burstN, codel, fq_codel, pie,
bulk[N], bulkup[N] (docs/testbed.md).
The testbed needs root and veth; it changes nothing outside its own namespaces.
`

func runTestbed(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stderr, testbedUsage)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "doxlab testbed %s: %v\n", args[0], advise(err))
		return 1
	}
	fs := newFlagSet("testbed "+args[0], stderr)
	fs.SetOutput(stderr)
	name := testbedNameVar(fs, "testbed `name`")
	switch args[0] {
	case "trace":
		return testbedTrace(args[1:], stdout, stderr)
	case "bloat":
		return testbedBloat(args[1:], stdout, stderr)
	}
	if run, ok := testbedCommands[args[0]]; ok {
		return run(&testbedCmd{fs: fs, name: name, args: args, stdout: stdout, stderr: stderr, fail: fail})
	}
	fmt.Fprintf(stderr, "doxlab testbed: unknown command %q\n%s", args[0], testbedUsage)
	return exitUsage
}

// testbedNameVar is --name, a testbed's name: one that is not a name
// (testbed.CheckName: "..", "a/b", a path of the emulator's log) is a
// usage error as it is parsed, before anything is made of it.
func testbedNameVar(fs *flag.FlagSet, usage string) *string {
	name := "doxlab"
	fs.Func("name", usage+` (default "doxlab")`, func(s string) error {
		if err := testbed.CheckName(s); err != nil {
			return err
		}
		name = s
		return nil
	})
	return &name
}

// testbedCmd is what a testbed subcommand gets: its flag set (with
// --name bound), the arguments (its name first), the outputs, and fail,
// which prints an error with advice and returns 1.
type testbedCmd struct {
	fs             *flag.FlagSet
	name           *string
	args           []string
	stdout, stderr io.Writer
	fail           func(error) int
}

// testbedCommands are the subcommands of 'doxlab testbed' that share its
// flag set; trace and bloat parse their own.
var testbedCommands = map[string]func(*testbedCmd) int{
	"up":      testbedUpCmd,
	"daemon":  testbedDaemonCmd,
	"down":    testbedDownCmd,
	"status":  testbedStatusCmd,
	"exec":    testbedExecCmd,
	"profile": testbedProfileCmd,
	"check":   testbedCheckCmd,
}

// testbedUpCmd is 'testbed up': the hosts, their profiles and the
// emulator, in the background (testbedUp).
func testbedUpCmd(c *testbedCmd) int {
	fs, name, args, stdout, stderr, fail := c.fs, c.name, c.args, c.stdout, c.stderr, c.fail
	hosts := fs.String("hosts", "client,server", "comma-separated host names; the first one's link is shaped")
	profile := fs.String("profile", "none", "profile of the first host's access link")
	pcap := fs.String("pcap", "", "write HOST-up.pcap and HOST-down.pcap into `DIR`")
	backend := fs.String("backend", "userspace", "link emulation: userspace (the emulator) or netem (sch_netem, where the kernel has it)")
	var hostProfiles stringList
	fs.Var(&hostProfiles, "host-profile", "`HOST=PROFILE` for another host's link (repeatable)")
	lowLat := fs.Bool("low-latency", false, "keep every CPU from halting while the testbed runs (a SCHED_IDLE spinner per CPU, PM QoS 0 µs), for VMs slow to wake a halted vCPU; every CPU shows busy")
	if _, code, ok := parseArgs(fs, args[1:]); !ok {
		return code
	}
	spec := testbed.Spec{Name: *name, Hosts: strings.Split(*hosts, ","), Profile: *profile, PcapDir: *pcap, Backend: *backend, HostProfiles: map[string]string{}, LowLatency: *lowLat}
	for _, hp := range hostProfiles {
		h, p, ok := strings.Cut(hp, "=")
		if !ok {
			return fail(fmt.Errorf("--host-profile %q: want HOST=PROFILE", hp))
		}
		spec.HostProfiles[h] = p
	}
	return testbedUp(spec, stdout, stderr)
}

// testbedDaemonCmd is internal: what 'up' starts in the background, the
// emulator itself, until a signal ends it.
func testbedDaemonCmd(c *testbedCmd) int {
	fs, args, stdout := c.fs, c.args, c.stdout
	spec := fs.String("spec", "", "")
	fs.Parse(args[1:])
	var s testbed.Spec
	if err := json.Unmarshal([]byte(*spec), &s); err != nil {
		fmt.Fprintf(stdout, "error: %v\n", err)
		return 1
	}
	testbed.HoldGC() // this process only emulates
	tb, err := testbed.Start(s)
	if err != nil {
		fmt.Fprintf(stdout, "error: %v\n", err)
		return 1
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	fmt.Fprintln(stdout, "ready")
	<-sig
	tb.Close()
	return exitOK
}

// testbedDownCmd is 'testbed down': the testbed's namespaces removed.
func testbedDownCmd(c *testbedCmd) int {
	fs, name, args, stdout, fail := c.fs, c.name, c.args, c.stdout, c.fail
	if _, code, ok := parseArgs(fs, args[1:]); !ok {
		return code
	}
	if err := testbed.Down(*name); err != nil {
		return fail(err)
	}
	// The emulator's log is kept only when it has something to say.
	if fi, err := os.Stat(testbedLog(*name)); err == nil && fi.Size() == 0 {
		os.Remove(testbedLog(*name))
	}
	fmt.Fprintf(stdout, "testbed %s is down\n", *name)
	return exitOK
}

// testbedStatusCmd is 'testbed status': the named testbed, or every one up.
func testbedStatusCmd(c *testbedCmd) int {
	fs, name, args, stdout, stderr, fail := c.fs, c.name, c.args, c.stdout, c.stderr, c.fail
	asJSON := fs.Bool("json", false, "print JSON")
	if _, code, ok := parseArgs(fs, args[1:]); !ok {
		return code
	}
	named := false
	fs.Visit(func(f *flag.Flag) { named = named || f.Name == "name" })
	if named {
		return testbedStatus(*name, *asJSON, stdout, stderr)
	}
	// Without --name: every testbed that is up.
	names, err := testbed.Names()
	if err != nil {
		return fail(err)
	}
	if len(names) == 0 {
		fmt.Fprintln(stdout, "no testbed is up")
		return exitOK
	}
	code := exitOK
	for _, n := range names {
		code = max(code, testbedStatus(n, *asJSON, stdout, stderr))
	}
	return code
}

// testbedExecCmd is 'testbed exec HOST -- CMD': a command in a host.
func testbedExecCmd(c *testbedCmd) int {
	fs, name, args, stdout, stderr, fail := c.fs, c.name, c.args, c.stdout, c.stderr, c.fail
	rest := args[1:]
	i := slices.Index(rest, "--")
	if i < 0 {
		i = len(rest)
	}
	pos, err := parseInterleaved(fs, rest[:i])
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		return exitUsage // said in its line
	}
	if len(pos) != 1 || i+1 >= len(rest) {
		return fail(fmt.Errorf("want: exec [--name N] HOST -- CMD [ARGS]"))
	}
	st, err := testbed.Load(*name)
	if err != nil {
		return fail(fmt.Errorf("testbed %s is not up", *name))
	}
	if _, ok := st.NS[pos[0]]; !ok {
		return fail(fmt.Errorf("no host %q in testbed %s (hosts: %s)", pos[0], *name, strings.Join(st.Spec.Hosts, ", ")))
	}
	cmd := st.Command(pos[0], rest[i+1:]...)
	if outFile(stdout) == os.Stdout && stderr == os.Stderr {
		// Become the command, so signals (a shell's kill, Ctrl-C) reach
		// it and nothing is orphaned.
		if err := syscall.Exec(cmd.Path, cmd.Args, os.Environ()); err != nil {
			return fail(err)
		}
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		return fail(err)
	}
	return exitOK
}

// testbedProfileCmd is 'testbed profile PROFILE': a host's link reshaped
// on a running testbed.
func testbedProfileCmd(c *testbedCmd) int {
	fs, name, args, stdout, fail := c.fs, c.name, c.args, c.stdout, c.fail
	host := fs.String("host", "", "host whose link to shape (default: the first host)")
	pos, err := parseInterleaved(fs, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		return exitUsage // said in its line
	}
	if len(pos) != 1 {
		return fail(fmt.Errorf("want: profile [--name N] [--host HOST] PROFILE"))
	}
	p, err := testbed.LookupProfile(pos[0])
	if err != nil {
		return fail(err)
	}
	st, err := testbed.Load(*name)
	if err != nil {
		return fail(fmt.Errorf("testbed %s is not up", *name))
	}
	if *host == "" {
		*host = st.Spec.Hosts[0]
	}
	if err := testbed.SetProfile(*name, *host, p); err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "testbed %s: %s's link is now %s\n", *name, *host, p.Name)
	return exitOK
}

// testbedCheckCmd is 'testbed check': the emulator's fidelity per profile
// on a testbed of its own.
func testbedCheckCmd(c *testbedCmd) int {
	fs, name, args, stdout, stderr := c.fs, c.name, c.args, c.stdout, c.stderr
	profiles := fs.String("profiles", strings.Join(testbed.ProfileNames(), ","), "profiles to check")
	probes := fs.Int("probes", 300, "RTT probes per profile")
	secs := fs.Duration("throughput", 2*time.Second, "throughput test per direction")
	asJSON := fs.Bool("json", false, "print JSON lines")
	load := fs.Int("cpu-load", 0, "keep `N` busy processes running during the check, as a browser would")
	backend := fs.String("backend", "userspace", "userspace or netem")
	lowLat := fs.Bool("low-latency", false, "keep every CPU from halting during the check, as testbed up --low-latency")
	browserLoad := fs.Bool("browser-load", false, "keep headless Chromium loading the corpus pages during the check, in a host of its own")
	if _, code, ok := parseArgs(fs, args[1:]); !ok {
		return code
	}
	// All of it is checked before a busy process or a testbed starts:
	// --cpu-load 100000 once started as many shells before a profile's
	// typo ended the check.
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "doxlab testbed check: "+format+"\n", a...)
		return exitUsage
	}
	opts := testbed.CheckOptions{Probes: *probes, Throughput: *secs}
	if *probes == 0 || *secs == 0 {
		return usage("--probes and --throughput must be more than 0")
	}
	if err := opts.Check(); err != nil {
		return usage("%v", err)
	}
	if *load < 0 || *load > maxCPULoad {
		return usage("--cpu-load %d: want 0 to %d busy processes", *load, maxCPULoad)
	}
	var ps []testbed.Profile
	for _, pn := range strings.Split(*profiles, ",") {
		p, err := testbed.LookupProfile(pn)
		if err != nil {
			return usage("%v", err)
		}
		ps = append(ps, p)
	}
	for range *load {
		busy := exec.Command("sh", "-c", "while :; do :; done")
		if busy.Start() == nil {
			defer busy.Process.Kill()
		}
	}
	spec := testbed.Spec{Name: *name + "-check", Backend: *backend, LowLatency: *lowLat}
	if *browserLoad {
		spec.Hosts = []string{"client", "server", "load"}
	}
	return testbedCheck(spec, ps, opts, *browserLoad, *asJSON, stdout, stderr)
}

// maxCPULoad bounds testbed check's --cpu-load: a browser keeps a few
// cores busy, not hundreds.
const maxCPULoad = 64

// testbedUp starts the emulator as a background process ('testbed daemon')
// and waits until it reports ready. A testbed already up is left as it is,
// with its profile switched if another was asked for.
func testbedUp(spec testbed.Spec, stdout, stderr io.Writer) int {
	if st, err := testbed.Load(spec.Name); err == nil && st.Alive() {
		p, err := testbed.LookupProfile(spec.Profile)
		if err == nil && st.Profiles[st.Spec.Hosts[0]].Name != p.Name {
			err = testbed.SetProfile(spec.Name, st.Spec.Hosts[0], p)
		}
		if err != nil {
			fmt.Fprintf(stderr, "doxlab testbed up: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "testbed %s is already up (pid %d); %s's link: %s\n", spec.Name, st.PID, st.Spec.Hosts[0], p.Name)
		return exitOK
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "doxlab testbed up: %v\n", err)
		return 1
	}
	b, _ := json.Marshal(spec)
	cmd := exec.Command(self, "testbed", "daemon", "--spec", string(b))
	detach(cmd) // survives the shell that ran 'up'
	logPath := testbedLog(spec.Name)
	logf, _ := os.Create(logPath)
	cmd.Stderr = logf
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "doxlab testbed up: starting the emulator: %v\n", err)
		return 1
	}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
	}()
	select {
	case l := <-line:
		if l != "ready" {
			cmd.Wait()
			if l == "" {
				l = "the emulator exited; see " + logPath
			}
			fmt.Fprintf(stderr, "doxlab testbed up: %s\n", strings.TrimPrefix(l, "error: "))
			return 1
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		fmt.Fprintf(stderr, "doxlab testbed up: the emulator did not start within 30 s; see %s\n", logPath)
		return 1
	}
	cmd.Process.Release()
	return testbedStatus(spec.Name, false, stdout, stderr)
}

// testbedLog is where a testbed's emulator writes its errors.
func testbedLog(name string) string {
	return filepath.Join(os.TempDir(), "doxlab-testbed-"+name+".log")
}

func testbedStatus(name string, asJSON bool, stdout, stderr io.Writer) int {
	st, err := testbed.Load(name)
	if err != nil {
		fmt.Fprintf(stderr, "doxlab testbed status: testbed %s is not up\n", name)
		return 1
	}
	stats, serr := testbed.ReadStats(name)
	if asJSON {
		json.NewEncoder(stdout).Encode(map[string]any{"state": st, "alive": st.Alive(), "stats": stats})
		return exitOK
	}
	alive := "running"
	if !st.Alive() || serr != nil {
		alive = fmt.Sprintf("NOT RUNNING (run 'doxlab testbed down --name %s' to clean up)", name)
	}
	fmt.Fprintf(stdout, "testbed %s: emulator pid %d, %s, since %s\n", name, st.PID, alive, st.Started.Format(time.RFC3339))
	for _, h := range st.Spec.Hosts {
		p := st.Profiles[h]
		if stats != nil {
			p = stats.Profiles[h]
		}
		fmt.Fprintf(stdout, "  %-10s %-15s netns %-28s link %-10s rtt +%v", h, st.IPs[h], st.NS[h], p.Name, p.RTT())
		if stats != nil {
			hs := stats.Hosts[h]
			fmt.Fprintf(stdout, "  pkts out %d in %d  drops %d/%d  lost %d/%d  late %v", hs.FromHost, hs.ToHost, hs.UpDropped, hs.DownDrop, hs.UpLost, hs.DownLost, hs.MeanLateness)
			if hs.UpCoDel+hs.DownCoDel > 0 {
				fmt.Fprintf(stdout, "  aqm drops %d/%d", hs.UpCoDel, hs.DownCoDel)
			}
			if c := p.Cross; c.Down+c.Up > 0 {
				fmt.Fprintf(stdout, "  cross %d↓ %d↑ flows, %.1f/%.1f MB", c.Down, c.Up, float64(hs.CrossDown)/1e6, float64(hs.CrossUp)/1e6)
			}
		}
		fmt.Fprintln(stdout)
	}
	if stats != nil {
		fmt.Fprintf(stdout, "  emulator cpu %v, SCHED_FIFO %v\n", stats.CPU.Round(time.Millisecond), stats.FIFO)
	}
	return exitOK
}

// testbedCheck measures each profile on a testbed of its own (the check
// switches profiles, so it never disturbs one that is up).
func testbedCheck(spec testbed.Spec, profiles []testbed.Profile, opts testbed.CheckOptions, withBrowser, asJSON bool, stdout, stderr io.Writer) int {
	defer testbed.HoldGC()() // the checks measure the emulator, which runs here
	tb, err := testbed.Start(spec)
	if err != nil {
		fmt.Fprintf(stderr, "doxlab testbed check: %v\n", err)
		return 1
	}
	defer tb.Close()
	// A closed pipe (| head), a kill or a hang-up must still reach Close,
	// so the scratch testbed is removed.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if withBrowser {
		stopBrowser, err := browserLoad(ctx, tb, "load")
		if err != nil {
			fmt.Fprintf(stderr, "doxlab testbed check: browser load: %v\n", err)
			return 1
		}
		defer func() {
			n, err := stopBrowser()
			if asJSON {
				json.NewEncoder(stdout).Encode(map[string]any{"browser_load_pages": n})
			} else {
				fmt.Fprintf(stdout, "browser load: Chromium loaded %d pages during the check\n", n)
			}
			if err != nil {
				fmt.Fprintf(stderr, "doxlab testbed check: browser load: %v\n", err)
			}
		}()
	}
	if !asJSON {
		testbed.WriteCheckHeader(stdout)
	}
	var preempt string // the kernel's preemption model, as the check found it
	for _, p := range profiles {
		res, err := tb.Check(ctx, p, opts)
		if err != nil {
			fmt.Fprintf(stderr, "doxlab testbed check: %s: %v\n", p.Name, err)
			return 1
		}
		preempt = res.Preemption
		if asJSON {
			json.NewEncoder(stdout).Encode(res)
			continue
		}
		res.WriteRows(stdout, p.Name)
	}
	if !asJSON {
		testbed.WriteCheckLegend(stdout, preempt)
	}
	return exitOK
}

// testbedTrace shows, converts and generates Mahimahi traces.
func testbedTrace(args []string, stdout, stderr io.Writer) int {
	usage := func(msg string) int {
		if msg != "" {
			fmt.Fprintf(stderr, "doxlab testbed trace: %s\n", msg)
		}
		fmt.Fprint(stderr, `usage: doxlab testbed trace show TRACE     period, mean rate, busiest and idlest 100 ms, SHA-256
       doxlab testbed trace convert LOG    a throughput log ("SECONDS BITS_PER_SECOND" lines) to a trace, on stdout
       doxlab testbed trace gen MODEL      a built-in synthetic trace, on stdout, to edit or keep
A TRACE is a file in Mahimahi's format or a built-in one: `+strings.Join(traceNames(), ", ")+`
`)
		return exitUsage
	}
	// A file that is not a trace is one line; the usage is for a
	// command that is not one.
	bad := func(err error) int {
		fmt.Fprintf(stderr, "doxlab testbed trace %s: %v\n", args[0], err)
		return exitUsage
	}
	if len(args) != 2 {
		return usage("")
	}
	switch args[0] {
	case "show":
		tr, err := testbed.LoadTrace(args[1])
		if err != nil {
			return bad(err)
		}
		fmt.Fprintf(stdout, "%s: %d opportunities of %d octets over %s, repeating; mean %.2f Mbit/s; %s; sha256 %s\n",
			tr.Name, tr.Total, testbed.OpportunityBytes, tr.Period(), tr.Rate()/1e6, traceWindows(tr), tr.Hash)
		return exitOK
	case "convert":
		f, err := os.Open(args[1])
		if err != nil {
			return bad(err)
		}
		defer f.Close()
		if err := testbed.ConvertThroughput(args[1], f, stdout); err != nil {
			return bad(err)
		}
		return exitOK
	case "gen":
		m, ok := testbed.BuiltinTraces[args[1]]
		if !ok {
			return usage(fmt.Sprintf("no built-in trace %q", args[1]))
		}
		if err := m.Write(stdout); err != nil {
			fmt.Fprintf(stderr, "doxlab testbed trace: %v\n", err)
			return 1
		}
		return exitOK
	}
	return usage(fmt.Sprintf("unknown command %q", args[0]))
}

// traceWindows says how far a trace's rate swings: its busiest and
// idlest whole window of testbed.FitWindow. A trace shorter than one
// window has none, and says so (it once said its windows carried 0).
// The windows are the second repetition's, as the trace runs: the first
// begins at 0 ms, which a trace's lines (from 1 ms, as Mahimahi's) never
// name, so a constant 720 Mbit/s once showed a window of 712.8.
func traceWindows(tr *testbed.Trace) string {
	p := tr.Period()
	if p < testbed.FitWindow {
		return fmt.Sprintf("shorter than one %v window", testbed.FitWindow)
	}
	lo, hi := math.Inf(1), 0.0
	for w := p; w+testbed.FitWindow <= 2*p; w += testbed.FitWindow {
		r := float64(tr.Bytes(w, w+testbed.FitWindow)) * 8 / testbed.FitWindow.Seconds()
		lo, hi = min(lo, r), max(hi, r)
	}
	return fmt.Sprintf("%v windows from %.2f to %.2f Mbit/s", testbed.FitWindow, lo/1e6, hi/1e6)
}

func traceNames() []string {
	var out []string
	for n := range testbed.BuiltinTraces {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// testbedBloat measures the RTT under a bulk TCP download per profile on
// a scratch testbed, and draws it over time.
func testbedBloat(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("testbed bloat", stderr)
	fs.SetOutput(stderr)
	profiles := fs.String("profiles", "dsl", "profiles (names or YAML files) to measure")
	d := fs.Duration("duration", 10*time.Second, "how long the download runs")
	fig := fs.String("figure", "", "draw the RTT over time into `FILE`.png (and .svg, .csv)")
	name := testbedNameVar(fs, "testbed `name` (the scratch testbed is NAME-bloat)")
	asJSON := fs.Bool("json", false, "one JSON object per profile, samples included")
	cc := fs.String("cc", "cubic", "the download's congestion control (cubic fills buffers; bbr keeps them short itself; empty: the kernel's default)")
	if _, code, ok := parseArgs(fs, args); !ok {
		return code
	}
	var ps []testbed.Profile
	for _, pn := range strings.Split(*profiles, ",") {
		p, err := testbed.LookupProfile(pn)
		if err != nil {
			fmt.Fprintf(stderr, "doxlab testbed bloat: %v\n", err)
			return exitUsage
		}
		ps = append(ps, p)
	}
	defer testbed.HoldGC()() // the download and the probes measure the emulator, which runs here
	tb, err := testbed.Start(testbed.Spec{Name: *name + "-bloat"})
	if err != nil {
		fmt.Fprintf(stderr, "doxlab testbed bloat: %v\n", err)
		return 1
	}
	defer tb.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var results []*testbed.LoadedRTT
	if !*asJSON {
		fmt.Fprintf(stdout, "%-16s %10s %12s %12s %12s %8s %14s %s\n", "profile", "idle ms", "loaded p50", "loaded p99", "goodput", "steal", "queue p50/p99", "drops")
	}
	for _, p := range ps {
		r, err := tb.MeasureLoadedRTT(ctx, p, *d, *cc)
		if err != nil {
			fmt.Fprintf(stderr, "doxlab testbed bloat: %s: %v\n", p.Name, err)
			return 1
		}
		results = append(results, r)
		if *asJSON {
			json.NewEncoder(stdout).Encode(r)
			continue
		}
		ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/1e6) }
		q, drops := "tail drop", "-"
		if r.Queue != nil {
			q = fmt.Sprintf("%s/%s", ms(r.Queue.SojournP50), ms(r.Queue.SojournP99))
			drops = fmt.Sprintf("%d by the AQM, %d over limit", r.Queue.Drops, r.Queue.Overlimit)
		}
		fmt.Fprintf(stdout, "%-16s %10s %12s %12s %7.1f Mbit/s %6dms %14s %s\n", p.Name, ms(r.IdleP50), ms(r.LoadedP50), ms(r.LoadedP99), r.Goodput/1e6, r.Steal.Milliseconds(), q, drops)
	}
	if *fig != "" {
		if err := drawBloat(results, *fig); err != nil {
			fmt.Fprintf(stderr, "doxlab testbed bloat: %v\n", err)
			return 1
		}
		fmt.Fprintf(stderr, "drew %s.png\n", strings.TrimSuffix(*fig, ".png"))
	}
	return exitOK
}

// drawBloat draws each profile's RTT over time, one panel each, on a
// log scale shared by all.
func drawBloat(rs []*testbed.LoadedRTT, file string) error {
	f := figure.Timelines{Name: strings.TrimSuffix(filepath.Base(file), ".png"), Title: "RTT under one bulk TCP download",
		XLabel: "time (s); the download starts at 1 s", YLabel: "RTT (ms)", Columns: [3]string{"profile", "sent s", "rtt ms"}}
	for _, r := range rs {
		tl := figure.Timeline{Label: r.Profile}
		for _, s := range r.Samples {
			tl.X, tl.Y = append(tl.X, s.At.Seconds()), append(tl.Y, float64(s.RTT)/1e6)
		}
		f.Panels = append(f.Panels, tl)
	}
	return (&figure.Set{Dir: filepath.Dir(file)}).AddTimelines(f)
}
