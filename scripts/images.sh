#!/usr/bin/env bash
# images: doxlab's two container images, built from scratch with buildah
# (no Docker daemon, no base image pulled from a registry) into
# dist/images as OCI archives:
#
#   doxlab           the static binary alone, run as a user of its own
#                    (uid 65532): servers, DNS workers, plan, report
#   doxlab-chromium  page workers: Debian 12 (debootstrap) with Chromium,
#                    nftables, iproute2, util-linux, the Liberation fonts
#                    and the doxlab-browser user; it starts as root, for
#                    what confines the browser (docs/campaigns.md)
#
#   bash scripts/images.sh              # both
#   IMAGES=doxlab bash scripts/images.sh
#
# Load one with: skopeo copy oci-archive:dist/images/doxlab.oci.tar
# docker-daemon:doxlab:VERSION (or podman load -i ...).
set -euo pipefail
cd "$(dirname "$0")/.."
IMAGES=${IMAGES:-"doxlab doxlab-chromium"}
WORK=${WORK:-/var/tmp/doxlab-images}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
for tool in buildah debootstrap; do
	command -v "$tool" >/dev/null || { echo "images: needs $tool (apt-get install buildah debootstrap)" >&2; exit 2; }
done
mkdir -p "$WORK" dist/images
# A store of the script's own, in vfs (no overlay module needed), and its
# temporary blobs beside it rather than in a small /var/tmp or /tmp.
# TMPDIR is buildah's alone: the chroot that installs the Chromium
# image's packages must keep its own /tmp.
b() { TMPDIR="$WORK/tmp" buildah --storage-driver vfs --root "$WORK/storage" --runroot "$WORK/run" "$@"; }
rm -rf "$WORK/tmp" && mkdir -p "$WORK/tmp"
trap 'rm -rf "$WORK/tmp"' EXIT
# The store is a scratch space: every image goes out as an archive, so
# what an earlier build (perhaps an interrupted one) left is removed. vfs
# keeps a whole copy per layer, and the tags of every commit built here
# would otherwise pile up until the disk is full. The Chromium image's
# base layer (its Debian root) is kept while its root is (base_tag).
base_tag() { echo "localhost/doxlab-chromium-base:$(cat "$WORK/chromium-root.id" 2>/dev/null || echo none)"; }
b rm --all >/dev/null 2>&1 || true
b images --format '{{.Name}}:{{.Tag}} {{.ID}}' 2>/dev/null | while read -r name id; do
	[ "$name" = "$(base_tag)" ] || b rmi --force "$id" >/dev/null 2>&1 || true
done
# The Chromium image needs its root (~0.9 GB), a container's copy, the
# committed layer and its blob: say so before a write fails half way.
need=$((5 * 1024 * 1024)) # KiB
free=$(df -Pk "$WORK" | awk 'NR==2 {print $4}')
if [ "$free" -lt "$need" ]; then
	echo "images: $WORK has $((free / 1024)) MiB free, needs $((need / 1024)) MiB (set WORK=DIR elsewhere)" >&2
	exit 1
fi

version=$(sed -n 's/^const Current = "\(v[0-9.]*\)"$/\1/p' internal/buildinfo/buildinfo.go)
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
tag="$version-dev.$commit"
if [ "$(git describe --tags --exact-match 2>/dev/null || true)" = "$version" ]; then
	tag=$version
fi
CGO_ENABLED=0 go build -trimpath -buildvcs=true -ldflags "-s -w" -o "$WORK/doxlab" ./cmd/doxlab

labels=(--label "org.opencontainers.image.title=doxlab" --label "org.opencontainers.image.version=$tag"
	--label "org.opencontainers.image.revision=$commit" --label "org.opencontainers.image.licenses=Apache-2.0"
	--label "org.opencontainers.image.source=https://github.com/doxlab/doxlab")

image_doxlab() {
	local root="$WORK/doxlab-root"
	rm -rf "$root" && mkdir -p "$root"/{etc/ssl/certs,tmp,usr/local/bin,home/doxlab}
	printf 'root:x:0:0:root:/root:/sbin/nologin\ndoxlab:x:65532:65532:doxlab:/home/doxlab:/sbin/nologin\n' >"$root/etc/passwd"
	printf 'root:x:0:\ndoxlab:x:65532:\n' >"$root/etc/group"
	cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
	cp "$WORK/doxlab" "$root/usr/local/bin/doxlab"
	cp LICENSE NOTICE "$root/"
	chmod 1777 "$root/tmp"
	chown 65532:65532 "$root/home/doxlab"
	local c
	c=$(b from scratch)
	b copy "$c" "$root" / >/dev/null
	b config --user 65532:65532 --workingdir /home/doxlab --env HOME=/home/doxlab --entrypoint '["/usr/local/bin/doxlab"]' --cmd '["--help"]' "${labels[@]}" "$c"
	b commit --rm "$c" "doxlab:$tag" >/dev/null
	b push "doxlab:$tag" "oci-archive:dist/images/doxlab.oci.tar:doxlab:$tag" >/dev/null
	b rmi "doxlab:$tag" >/dev/null
}

# The Chromium image is two layers: the Debian root with Chromium
# (~360 MB compressed), made once while its package list holds and kept
# in the store as the base image, and doxlab with its license on top
# (~22 MB). A build copies, commits and compresses the small layer only
# (106 s for the root whole at each build before), and a pull of a new
# doxlab fetches only it.
image_chromium() {
	local root="$WORK/chromium-root" pkgs="chromium nftables iproute2 util-linux ca-certificates fonts-liberation"
	# The Debian root is kept between builds while its package list holds.
	if [ "$(cat "$root.pkgs" 2>/dev/null)" != "$pkgs" ]; then
		rm -rf "$root" "$root.pkgs" "$root.id"
		debootstrap --variant=minbase bookworm "$root" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 ||
			{ tail -5 "$WORK/debootstrap.log" >&2; exit 1; }
		chroot "$root" sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $pkgs >/dev/null &&
			apt-get clean && rm -rf /var/lib/apt/lists/* && useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin doxlab-browser"
		# The page loader binds its own resolv.conf, hosts and
		# nsswitch.conf over these for the browser: they must exist.
		printf '127.0.0.1 localhost\n::1 localhost\n' >"$root/etc/hosts"
		touch "$root/etc/resolv.conf"
		echo "$pkgs" >"$root.pkgs"
	fi
	# The base names its root: one made anew gets a base of its own.
	[ -s "$root.id" ] || date -u +%Y%m%d%H%M%S >"$root.id"
	local base c
	base=$(base_tag)
	if ! b inspect --type image "$base" >/dev/null 2>&1; then
		rm -f "$root/usr/local/bin/doxlab" "$root/LICENSE" "$root/NOTICE" # an earlier build's, in the root then
		c=$(b from scratch)
		b copy "$c" "$root" / >/dev/null
		b commit --rm "$c" "$base" >/dev/null
	fi
	c=$(b from --pull=never "$base")
	b copy "$c" "$WORK/doxlab" /usr/local/bin/doxlab >/dev/null
	b copy "$c" LICENSE NOTICE / >/dev/null
	b config --user 0:0 --env DOXLAB_BROWSER_USER=doxlab-browser --entrypoint '["/usr/local/bin/doxlab"]' --cmd '["worker"]' \
		"${labels[@]}" --label "org.opencontainers.image.title=doxlab-chromium" "$c"
	b commit --rm "$c" "doxlab-chromium:$tag" >/dev/null
	b push "doxlab-chromium:$tag" "oci-archive:dist/images/doxlab-chromium.oci.tar:doxlab-chromium:$tag" >/dev/null
	b rmi "doxlab-chromium:$tag" >/dev/null
}

for img in $IMAGES; do
	start=$(date +%s)
	case $img in
	doxlab) image_doxlab ;;
	doxlab-chromium) image_chromium ;;
	*) echo "images: unknown image $img" >&2; exit 2 ;;
	esac
	printf 'images: %-16s %s  dist/images/%s.oci.tar, %s MB compressed, %s s\n' "$img" "$tag" "$img" \
		"$(( $(stat -c %s "dist/images/$img.oci.tar") / 1000000 ))" "$(( $(date +%s) - start ))"
done
