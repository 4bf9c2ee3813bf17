// Package sysinfo reads facts about the machine that shape timing, for
// the records and for the testbed's fidelity check.
package sysinfo

import "sync"

// Preemption is the kernel's preemption model: none, voluntary, full,
// lazy or rt, or "" when it cannot be told. Under none and voluntary a
// woken thread, even a real-time one, waits until whatever runs in the
// kernel on its CPU yields: a busy machine (a browser starting renderers)
// then delays the emulator's packets by up to milliseconds, which
// preempt=full on the kernel command line removes. It is read once: the
// model does not change while the machine runs.
var Preemption = sync.OnceValue(preemption)
