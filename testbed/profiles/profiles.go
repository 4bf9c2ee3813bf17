// Package profiles names the testbed's built-in access profiles, in
// their order, for the packages that sort or check labels (internal/
// order, specs) without linking the testbed that emulates them.
package profiles

// TableII names the cross-layer paper's five access profiles, fastest
// first: the experiments' default. testbed.Profiles shapes each.
var TableII = []string{"fiber", "cable", "dsl", "4g", "4g-medium"}

// Names lists the built-in profiles in a stable order: "none" (no link
// emulated), then Table II's.
func Names() []string {
	return append([]string{"none"}, TableII...)
}
