// Package sheet keeps the CSV files doxlab writes safe to open in a
// spreadsheet: a text cell that begins as a formula would (OWASP's CSV
// injection advice: =, +, -, @, a tab or a carriage return) is written
// after a quote, which spreadsheets show and do not run. The text comes
// from stores, resolvers and vantage points doxlab does not trust.
package sheet

import (
	"strconv"
	"strings"
)

// Text is s as a text cell: quoted where a spreadsheet would run it.
func Text(s string) string {
	if runs(s) {
		return "'" + s
	}
	return s
}

// runs is whether a spreadsheet would run s as a formula.
func runs(s string) bool { return s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) }

// Cell is s as a cell of a column that mixes numbers and text (a
// figure's data: labels beside values): a number, -1.5 or +Inf, as it
// is; text as Text.
func Cell(s string) string {
	if !runs(s) {
		return s // a number or not, nothing to run (and no number parsed)
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return s
	}
	return "'" + s
}
