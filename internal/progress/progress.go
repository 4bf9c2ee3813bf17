// Package progress shows how far a long run is: on a terminal a bar
// redrawn in place with the count done, the rate and an ETA; elsewhere a
// plain line every tenth of the way and at least every 30 seconds. Log
// lines written through the Meter clear the bar first and redraw it
// after, so the two never garble each other.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

// Meter reports progress on a writer.
type Meter struct {
	w    io.Writer
	tty  bool
	unit string // what is counted: "tasks", "measurements"

	mu        sync.Mutex
	start     time.Time
	first     int // done at the first update: a resumed run's earlier work is no rate
	done      int
	total     int
	line      string // the bar as last drawn, "" if none
	lastTenth int
	lastPlain time.Time
}

// plainEvery is the longest a plain-line report stays silent.
const plainEvery = 30 * time.Second

// New reports on w, as a bar when w is a terminal.
func New(w io.Writer, unit string) *Meter {
	m := &Meter{w: w, unit: unit, first: -1, lastTenth: -1}
	if f, ok := w.(*os.File); ok {
		m.tty = term.IsTerminal(int(f.Fd()))
	}
	return m
}

// Update says done of total are done.
func (m *Meter) Update(done, total int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	if m.first < 0 {
		m.first, m.start = done, now
	}
	m.done, m.total = done, total
	status := m.status(now)
	if m.tty {
		m.clear()
		m.line = status
		fmt.Fprint(m.w, m.line)
		if done >= total {
			fmt.Fprintln(m.w)
			m.line = ""
		}
		return
	}
	tenth := 10 * done / max(total, 1)
	if tenth != m.lastTenth || now.Sub(m.lastPlain) >= plainEvery || done >= total {
		m.lastTenth, m.lastPlain = tenth, now
		fmt.Fprintln(m.w, "progress: "+status)
	}
}

// status is "12/60 measurements, 31.2/min, ETA 1m33s".
func (m *Meter) status(now time.Time) string {
	el := now.Sub(m.start)
	perSec := 0.0
	if el > 0 {
		perSec = float64(m.done-m.first) / el.Seconds()
	}
	rate := fmt.Sprintf("%.1f/s", perSec)
	if perSec < 1 {
		rate = fmt.Sprintf("%.1f/min", 60*perSec)
	}
	eta := "?"
	if perSec > 0 {
		eta = (time.Duration(float64(m.total-m.done)/perSec*float64(time.Second)) + time.Second/2).Truncate(time.Second).String()
	}
	s := fmt.Sprintf("%d/%d %s, %s, ETA %s", m.done, m.total, m.unit, rate, eta)
	if m.tty {
		const width = 30
		n := width * min(m.done, m.total) / max(m.total, 1)
		s = "[" + strings.Repeat("=", n) + strings.Repeat(" ", width-n) + "] " + s
	}
	return s
}

// clear erases the bar, if drawn.
func (m *Meter) clear() {
	if m.line != "" {
		fmt.Fprint(m.w, "\r\x1b[K")
	}
}

// Write writes a log line above the bar.
func (m *Meter) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.clear()
	n, err := m.w.Write(p)
	if m.line != "" {
		fmt.Fprint(m.w, m.line)
	}
	return n, err
}

// Done erases the bar of a run that ended before its total.
func (m *Meter) Done() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.clear()
	m.line = ""
}
