#!/bin/bash
# Installs NVIDIA enroot (release .debs) and builds the pyxis SPANK plugin for the installed
# Slurm. Runs as root in a `dlami` layer; the guard fails the bake if anything here pulls a new
# kernel or touches a held package, so it installs with --no-upgrade and never upgrades.
#
# Every download is checked against the SHA-256 the template pins (ENROOT_DEB_SHA256,
# ENROOT_CAPS_DEB_SHA256, PYXIS_TARBALL_SHA256) before it is used. The compiler and headers
# pyxis is built with are removed again at the end: exactly the packages this script's build
# step added, so nothing the DLAMI shipped goes (its DKMS modules need its compiler).
set -euo pipefail
export LC_ALL=C
: "${ENROOT_VERSION:?}" "${PYXIS_VERSION:?}"
: "${ENROOT_DEB_SHA256:?}" "${ENROOT_CAPS_DEB_SHA256:?}" "${PYXIS_TARBALL_SHA256:?}"
arch=$(dpkg --print-architecture)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

# fetch URL FILE SHA256: downloads URL to FILE and fails unless its SHA-256 is SHA256.
fetch() {
  local url=$1 file=$2 want=$3
  curl -fsSL --retry 3 -o "$file" "$url"
  if ! echo "$want  $file" | sha256sum -c --strict -; then
    echo "enroot-pyxis: $url does not have the SHA-256 the template pins ($want): got $(sha256sum "$file" | cut -d' ' -f1)" >&2
    exit 1
  fi
}

# Runtime dependencies of enroot: they stay in the image.
apt-get update
apt-get install -y --no-install-recommends --no-upgrade \
  curl ca-certificates jq parallel squashfs-tools squashfuse fuse-overlayfs pigz zstd

base=https://github.com/NVIDIA/enroot/releases/download/v${ENROOT_VERSION}
fetch "$base/enroot_${ENROOT_VERSION}-1_${arch}.deb" "enroot_${ENROOT_VERSION}-1_${arch}.deb" "$ENROOT_DEB_SHA256"
fetch "$base/enroot+caps_${ENROOT_VERSION}-1_${arch}.deb" "enroot+caps_${ENROOT_VERSION}-1_${arch}.deb" "$ENROOT_CAPS_DEB_SHA256"
apt-get install -y --no-upgrade "./enroot_${ENROOT_VERSION}-1_${arch}.deb" "./enroot+caps_${ENROOT_VERSION}-1_${arch}.deb"

# installed: the names of the installed packages, sorted.
installed() {
  dpkg-query -W -f='${db:Status-Status} ${Package}\n' | awk '$1 == "installed" { print $2 }' | sort -u
}

# Build dependencies of pyxis: whatever this install adds is removed after the build.
installed >installed-before-build
apt-get install -y --no-install-recommends --no-upgrade build-essential libslurm-dev
installed >installed-after-build
comm -13 installed-before-build installed-after-build >build-deps

fetch "https://github.com/NVIDIA/pyxis/archive/refs/tags/v${PYXIS_VERSION}.tar.gz" pyxis.tar.gz "$PYXIS_TARBALL_SHA256"
tar xzf pyxis.tar.gz
make -C "pyxis-${PYXIS_VERSION}" -j"$(nproc)"
make -C "pyxis-${PYXIS_VERSION}" install prefix=/usr/local
mkdir -p /etc/slurm/plugstack.conf.d
echo "required /usr/local/lib/slurm/spank_pyxis.so" >/etc/slurm/plugstack.conf.d/pyxis.conf
grep -qs 'plugstack.conf.d' /etc/slurm/plugstack.conf ||
  echo 'include /etc/slurm/plugstack.conf.d/*' >>/etc/slurm/plugstack.conf

if [ -s build-deps ]; then
  echo "enroot-pyxis: removing the build dependencies: $(tr '\n' ' ' <build-deps)"
  xargs apt-get purge -y <build-deps
fi

enroot version
test -f /usr/local/lib/slurm/spank_pyxis.so
