#!/usr/bin/env bash
# release: doxlab's release archives for linux/amd64, linux/arm64,
# darwin/amd64, darwin/arm64, windows/amd64 and freebsd/amd64, each with
# its third-party licenses, their SHA-256 checksums and an SPDX SBOM of
# each, in dist/ (GoReleaser, syft; both pinned, built from the module
# proxy once). At a tag vX.Y.Z that equals buildinfo.Current the
# binaries are that release; anywhere else a snapshot whose binaries say
# they are a development build. Nothing is uploaded.
set -euo pipefail
cd "$(dirname "$0")/.."
GORELEASER_VERSION=v2.15.1
SYFT_VERSION=v1.57.1
GOBIN=$(go env GOPATH)/bin
export PATH="$GOBIN:$PATH"
if ! go version -m "$GOBIN/goreleaser" 2>/dev/null | grep -q "goreleaser/v2.*$GORELEASER_VERSION"; then
	go install "github.com/goreleaser/goreleaser/v2@$GORELEASER_VERSION"
fi
if ! go version -m "$GOBIN/syft" 2>/dev/null | grep -q "anchore/syft.*$SYFT_VERSION"; then
	go install "github.com/anchore/syft/cmd/syft@$SYFT_VERSION"
fi
current=$(sed -n 's/^const Current = "\(v[0-9.]*\)"$/\1/p' internal/buildinfo/buildinfo.go)
export DOXLAB_VERSION=$current DOXLAB_COMMIT=$(git rev-parse --short=12 HEAD)
tag=$(git describe --tags --exact-match 2>/dev/null || true)
if [ -n "$tag" ]; then
	[ "$tag" = "$current" ] || { echo "release: HEAD is tagged $tag, but buildinfo.Current is $current (and CHANGELOG.md's newest release must be too)" >&2; exit 1; }
	goreleaser release --clean
else
	echo "release: HEAD carries no release tag: a snapshot after $current" >&2
	goreleaser release --snapshot --clean
fi
rm -rf dist-licenses
ls -1 dist/*.tar.gz dist/*.zip dist/*.spdx.json dist/checksums.txt
