package server

import (
	"time"
)

// workers run a connection's per-stream work (a DoQ or DNS-stream query,
// an HTTP/3 request) on goroutines kept between streams. A goroutine
// started per stream grows its stack from the smallest size through each
// doubling on every query (runtime.newstack and copystack were 13 % of
// DoH/3's CPU); a kept one has grown already. A stream that finds no
// idle worker starts one, so a task that blocks (a delayed answer) never
// holds another up, and a worker idle for workerIdle exits.
type workers struct {
	tasks chan func()
	done  <-chan struct{}
}

const workerIdle = 10 * time.Second

func newWorkers(done <-chan struct{}) *workers {
	return &workers{tasks: make(chan func()), done: done}
}

// run runs f on an idle worker, or on a new one.
func (w *workers) run(f func()) {
	select {
	case w.tasks <- f:
	default:
		go w.loop(f)
	}
}

func (w *workers) loop(f func()) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		f()
		idle.Reset(workerIdle)
		select {
		case f = <-w.tasks:
		case <-idle.C:
			return
		case <-w.done:
			return
		}
	}
}
