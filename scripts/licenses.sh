#!/usr/bin/env bash
# licenses: every dependency of doxlab's binary and packages is under a
# license compatible with doxlab's Apache-2.0, as go-licenses (pinned,
# built from the module proxy once) classifies each module's own license
# file. Three modules carry a license file its classifier does not name;
# they are ignored here because their files were read, and say:
#   github.com/ajstarks/svgo         CC-BY-4.0 (attribution: NOTICE)
#   github.com/golang/freetype       FreeType License or GPL-2.0+, FTL taken (credit: NOTICE)
#   modernc.org/mathutil             BSD-3-Clause (a wording the classifier misses)
# A new dependency, or a version whose license changed, fails the check.
#   bash scripts/licenses.sh           # check
#   bash scripts/licenses.sh save DIR  # the license texts, for an archive
set -euo pipefail
cd "$(dirname "$0")/.."
GO_LICENSES_VERSION=v1.6.0
GOBIN=$(go env GOPATH)/bin
if ! go version -m "$GOBIN/go-licenses" 2>/dev/null | grep -q "go-licenses.*$GO_LICENSES_VERSION"; then
	go install "github.com/google/go-licenses@$GO_LICENSES_VERSION"
fi
ignore=(--ignore github.com/doxlab/doxlab --ignore github.com/ajstarks/svgo --ignore github.com/golang/freetype --ignore modernc.org/mathutil)
allowed=Apache-2.0,BSD-2-Clause,BSD-3-Clause,MIT,ISC,MPL-2.0
if [ "${1:-}" = save ]; then
	rm -rf "$2"
	"$GOBIN/go-licenses" save ./cmd/doxlab --save_path "$2" "${ignore[@]}" 2>/dev/null
	for m in github.com/ajstarks/svgo github.com/golang/freetype modernc.org/mathutil; do
		dir=$(go list -m -f '{{.Dir}}' "$m")
		mkdir -p "$2/$m" && cp "$dir"/LICENSE* "$2/$m/"
	done
	exit 0
fi
# The classifier warns about assembly files it cannot attribute: noise.
"$GOBIN/go-licenses" check ./... --allowed_licenses="$allowed" "${ignore[@]}" 2> >(grep -Ev '^W|\.s$' >&2)
echo "licenses: every dependency is under $allowed (and the three read by hand above)"
