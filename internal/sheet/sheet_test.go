package sheet

import "testing"

// TestCells: text a spreadsheet would run gets a quote; numbers, in any
// form strconv writes them, stay numbers; other text is as it was.
func TestCells(t *testing.T) {
	for in, want := range map[string]string{
		`=HYPERLINK("http://x","y")`: `'=HYPERLINK("http://x","y")`,
		"+cmd":                       "'+cmd",
		"-2+3":                       "'-2+3",
		"@SUM(A1)":                   "'@SUM(A1)",
		"\tx":                        "'\tx",
		"\rx":                        "'\rx",
		"DoQ 0rtt":                   "DoQ 0rtt",
		"":                           "",
		"a=b":                        "a=b",
	} {
		if got := Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
		if got := Cell(in); got != want {
			t.Errorf("Cell(%q) = %q, want %q", in, got, want)
		}
	}
	for _, n := range []string{"-1.5", "+2", "-0", "1e-9", "-Inf", "+Inf", "NaN", "-1e+308"} {
		if got := Cell(n); got != n {
			t.Errorf("Cell(%q) = %q: a number stays one", n, got)
		}
	}
	if got := Text("-1.5"); got != "'-1.5" {
		t.Errorf("Text(%q) = %q: a text column's cell is text, whatever it reads as", "-1.5", got)
	}
}
