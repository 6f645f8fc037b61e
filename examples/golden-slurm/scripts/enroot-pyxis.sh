#!/bin/bash
# Installs NVIDIA enroot (release .debs) and builds the pyxis SPANK plugin for the installed
# Slurm. Runs as root in a `dlami` layer; the guard fails the bake if anything here pulls a new
# kernel or touches a held package, so it installs with --no-upgrade and never upgrades.
set -euo pipefail
: "${ENROOT_VERSION:?}" "${PYXIS_VERSION:?}"
arch=$(dpkg --print-architecture)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

apt-get update
apt-get install -y --no-install-recommends --no-upgrade \
  curl ca-certificates jq parallel squashfs-tools squashfuse fuse-overlayfs pigz zstd \
  build-essential libslurm-dev

base=https://github.com/NVIDIA/enroot/releases/download/v${ENROOT_VERSION}
curl -fsSLO "$base/enroot_${ENROOT_VERSION}-1_${arch}.deb"
curl -fsSLO "$base/enroot+caps_${ENROOT_VERSION}-1_${arch}.deb"
apt-get install -y --no-upgrade "./enroot_${ENROOT_VERSION}-1_${arch}.deb" "./enroot+caps_${ENROOT_VERSION}-1_${arch}.deb"

curl -fsSL -o pyxis.tar.gz "https://github.com/NVIDIA/pyxis/archive/refs/tags/v${PYXIS_VERSION}.tar.gz"
tar xzf pyxis.tar.gz
make -C "pyxis-${PYXIS_VERSION}" -j"$(nproc)"
make -C "pyxis-${PYXIS_VERSION}" install prefix=/usr/local
mkdir -p /etc/slurm/plugstack.conf.d
echo "required /usr/local/lib/slurm/spank_pyxis.so" >/etc/slurm/plugstack.conf.d/pyxis.conf
grep -qs 'plugstack.conf.d' /etc/slurm/plugstack.conf ||
  echo 'include /etc/slurm/plugstack.conf.d/*' >>/etc/slurm/plugstack.conf

enroot version
