#!/bin/bash
# EKS node components on the DLAMI. Runs as root in a `dlami` layer. Installs no GPU driver and
# no device plugin: the AMI owns the driver, the cluster owns the device plugin.
set -euo pipefail
: "${KUBERNETES_VERSION:?}" "${KUBERNETES_PATCH:?}" "${EKS_BUILD_DATE:?}"
arch=$(dpkg --print-architecture)   # amd64 | arm64, the bucket's names too
base="https://amazon-eks.s3.us-west-2.amazonaws.com/${KUBERNETES_PATCH}/${EKS_BUILD_DATE}/bin/linux/${arch}"

apt-get update
apt-get install -y --no-install-recommends --no-upgrade conntrack ethtool socat iptables ebtables curl

# Each binary is checked against the .sha256 EKS publishes beside it.
fetch() {
  local name=$1 dest=$2
  curl -fsSL -o "/tmp/$name" "$base/$name"
  curl -fsSL -o "/tmp/$name.sha256" "$base/$name.sha256"
  (cd /tmp && echo "$(cut -d' ' -f1 "$name.sha256")  $name" | sha256sum -c -)
  install -m 0755 "/tmp/$name" "$dest/$name"
  rm -f "/tmp/$name" "/tmp/$name.sha256"
}
install -d /usr/bin /etc/eks/image-credential-provider
fetch kubelet /usr/bin
fetch aws-iam-authenticator /usr/bin
fetch ecr-credential-provider /etc/eks/image-credential-provider

# containerd: the one shipped with the DLAMI; make the NVIDIA runtime its default so pods get
# GPUs through the toolkit the AMI owns.
command -v containerd >/dev/null || { echo "containerd not found on the DLAMI" >&2; exit 1; }
mkdir -p /etc/containerd
[ -s /etc/containerd/config.toml ] || containerd config default >/etc/containerd/config.toml
nvidia-ctk runtime configure --runtime=containerd --set-as-default
sed -i 's/SystemdCgroup = false/SystemdCgroup = true/' /etc/containerd/config.toml
systemctl enable containerd

# kubelet starts only after user-data has written its config (see README-bootstrap.txt).
install -d /etc/kubernetes/kubelet /var/lib/kubelet
systemctl daemon-reload
systemctl disable kubelet 2>/dev/null || true

echo "kubelet $(/usr/bin/kubelet --version)"
