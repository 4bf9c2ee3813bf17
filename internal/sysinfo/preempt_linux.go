package sysinfo

import (
	"bufio"
	"compress/gzip"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

func preemption() string {
	// The running model, where debugfs is readable: "none (voluntary) full".
	if b, err := os.ReadFile("/sys/kernel/debug/sched/preempt"); err == nil {
		if m := running(string(b)); m != "" {
			return m
		}
	}
	if b, err := os.ReadFile("/proc/cmdline"); err == nil {
		for _, f := range strings.Fields(string(b)) {
			if v, ok := strings.CutPrefix(f, "preempt="); ok {
				return v
			}
		}
	}
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return ""
	}
	if strings.Contains(unix.ByteSliceToString(u.Version[:]), "PREEMPT_RT") {
		return "rt"
	}
	// The build's default, from its configuration.
	var config io.Reader
	if f, err := os.Open("/boot/config-" + unix.ByteSliceToString(u.Release[:])); err == nil {
		defer f.Close()
		config = f
	} else if f, err := os.Open("/proc/config.gz"); err == nil {
		defer f.Close()
		if config, err = gzip.NewReader(f); err != nil {
			return ""
		}
	} else {
		return ""
	}
	return fromConfig(config)
}

// running picks the model in parentheses from debugfs's list of them.
func running(list string) string {
	if i, j := strings.IndexByte(list, '('), strings.IndexByte(list, ')'); i >= 0 && j > i {
		return list[i+1 : j]
	}
	return ""
}

// fromConfig finds the preemption model a kernel configuration selects.
func fromConfig(config io.Reader) string {
	models := map[string]string{"CONFIG_PREEMPT_NONE=y": "none", "CONFIG_PREEMPT_VOLUNTARY=y": "voluntary",
		"CONFIG_PREEMPT=y": "full", "CONFIG_PREEMPT_LAZY=y": "lazy", "CONFIG_PREEMPT_RT=y": "rt"}
	sc := bufio.NewScanner(config)
	for sc.Scan() {
		if m, ok := models[sc.Text()]; ok {
			return m
		}
	}
	return ""
}
