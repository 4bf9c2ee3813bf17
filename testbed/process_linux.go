package testbed

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	ossignal "os/signal"
	"sync"
	"syscall"
	"time"
)

// A testbed started with Spec.Separate runs its emulator in a child
// process: this program again, re-executed with the spec in childEnv
// (the init below runs the child before main, in any program that links
// this package, test binaries included). The child allocates nothing per
// packet, so no garbage collector stops it; in the process that runs the
// experiment, servers, page loaders and the store allocate all the time,
// and each stop-the-world pause there would hold every packet on the
// links (up to 5 ms measured, issue 21). The parent keeps the
// namespaces' state and runs its own sockets inside the hosts as before;
// profile switches, link checks and cross-traffic counters go over the
// control socket.
const childEnv = "DOXLAB_TESTBED_CHILD"

func init() {
	if spec, ok := os.LookupEnv(childEnv); ok {
		os.Exit(runChild(spec))
	}
}

// runChild runs the testbed of spec until its parent closes our stdin
// (Close, or the parent's death) or a signal says to stop.
func runChild(specJSON string) int {
	os.Unsetenv(childEnv)
	var spec Spec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "testbed child: bad spec:", err)
		return 2
	}
	spec.Separate = false
	HoldGC()
	stop := make(chan os.Signal, 1)
	ossignal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	tb, err := Start(spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("ready")
	go func() {
		io.Copy(io.Discard, os.Stdin)
		stop <- syscall.SIGTERM
	}()
	<-stop
	if err := tb.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// child is the process a Separate testbed's emulator runs in.
type child struct {
	cmd   *exec.Cmd
	stdin io.Closer
	done  chan error
}

// startChild re-executes this program as spec's emulator and waits for
// it to say the testbed is up.
func startChild(spec Spec) (*Testbed, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("testbed: finding this program to run the emulator: %w", err)
	}
	b, _ := json.Marshal(spec)
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), childEnv+"="+string(b))
	said := &lastLine{w: os.Stderr}
	cmd.Stderr = said
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("testbed: starting the emulator's process: %w", err)
	}
	c := &child{cmd: cmd, stdin: stdin, done: make(chan error, 1)}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		ok := sc.Scan() && sc.Text() == "ready"
		ready <- ok
		io.Copy(io.Discard, stdout) // never block the child on a full pipe
	}()
	go func() { c.done <- cmd.Wait() }()
	fail := func(why error) (*Testbed, error) {
		stdin.Close()
		cmd.Process.Kill()
		Down(spec.Name)
		return nil, why
	}
	select {
	case ok := <-ready:
		if !ok {
			err := <-c.done
			if l := said.last(); l != "" {
				err = errors.New(l)
			}
			return fail(fmt.Errorf("testbed %s: the emulator's process ended before the testbed was up: %w", spec.Name, err))
		}
	case <-time.After(2 * time.Minute):
		return fail(fmt.Errorf("testbed %s: the emulator's process did not bring the testbed up in 2 minutes", spec.Name))
	}
	st, err := Load(spec.Name)
	if err != nil {
		return fail(fmt.Errorf("testbed %s: reading the state the emulator's process wrote: %w", spec.Name, err))
	}
	st.Spec.Separate = true
	return &Testbed{State: *st, dir: stateDir(spec.Name), child: c}, nil
}

// close stops the child, which removes what it built; what it left (it
// was killed) Down removes.
func (c *child) close(name string) error {
	c.stdin.Close()
	select {
	case err := <-c.done:
		if err != nil {
			return errors.Join(fmt.Errorf("testbed %s: the emulator's process: %w", name, err), Down(name))
		}
		return nil
	case <-time.After(15 * time.Second):
		c.cmd.Process.Kill()
		<-c.done
		return Down(name)
	}
}

// remote sends req to the child's control socket; ctx ends the wait.
func (tb *Testbed) remote(ctx context.Context, req request, timeout time.Duration) (*response, error) {
	type answer struct {
		r   *response
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		r, err := controlWithin(tb.Spec.Name, req, timeout)
		ch <- answer{r, err}
	}()
	ended := func(err error) error {
		tb.child.done <- err // for close
		return fmt.Errorf("testbed %s: the emulator's process ended: %w", tb.Spec.Name, err)
	}
	select {
	case a := <-ch:
		if a.err != nil && a.r == nil { // no answer: say why, if the child died
			select {
			case err := <-tb.child.done:
				return nil, ended(err)
			case <-time.After(200 * time.Millisecond):
			}
		}
		return a.r, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case err := <-tb.child.done:
		return nil, ended(err)
	}
}

// errSeparate is what the parts that need the emulator in this process
// say of a Separate testbed.
func errSeparate(what string) error {
	return fmt.Errorf("%s needs the emulator in this process; start the testbed without Separate", what)
}

// lastLine passes what the child says on to w and keeps its last line,
// for the error when the child fails.
type lastLine struct {
	w    io.Writer
	mu   sync.Mutex
	line []byte
}

func (l *lastLine) Write(p []byte) (int, error) {
	l.mu.Lock()
	if t := bytes.TrimRight(p, "\n"); len(t) > 0 {
		if i := bytes.LastIndexByte(t, '\n'); i >= 0 {
			t = t[i+1:]
		}
		l.line = append(l.line[:0], t...)
	}
	l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lastLine) last() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.line)
}
