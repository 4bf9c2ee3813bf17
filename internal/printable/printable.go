// Package printable makes stored text safe to print on a terminal: a
// label, target or error that came from a spec, a peer or the network
// may carry ESC and BEL, which a terminal would act on (move the cursor,
// retitle the window, ring) instead of showing.
package printable

import (
	"fmt"
	"strings"
	"unicode"
)

// String is s with every control character (C0, DEL, C1) written as a
// Go escape: "\x1b[2J" prints as `\x1b[2J`.
func String(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case !unicode.IsControl(r):
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}
