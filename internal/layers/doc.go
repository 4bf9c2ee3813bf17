// Package layers holds no code: its test reads the module's import graph
// (go list) and keeps the floors apart where Go's internal rule and
// depguard, which sees direct imports only, cannot: the store, the page
// loader, bench and the label order link nothing above them, even through
// another package, and no experiment reaches another. A new experiment
// needs no edit here: the test finds them under experiment/.
package layers
