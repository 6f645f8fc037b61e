// Package hosttools names the executables the checks run on a DLAMI host, at their real
// absolute paths. Packer's SSH commands get no login shell, so nothing here relies on a
// profile script's PATH; each tool falls back to a PATH lookup only after its real paths, and
// the report shows which path answered. One owner: the guard and the host checks take their
// tools from here.
package hosttools

import "github.com/dlami-bake/packer-plugin-dlami/internal/bundle"

// AptLockTimeoutSeconds is how long apt waits for a dpkg lock held by cloud-init or
// unattended-upgrades at first boot, instead of failing at once: the layers' apt-get and the
// host's apt-mark hold both wait this long.
const AptLockTimeoutSeconds = 900

// Ubuntu 24.04 is usr-merged: /bin, /sbin and /lib point into /usr. The /usr paths come first;
// the unmerged ones are kept for older images.
var (
	// NvidiaSMI is installed by every driver packaging (NVIDIA's repository, Ubuntu's
	// archive, the .run installer) at /usr/bin.
	NvidiaSMI = tool("nvidia-smi", "/usr/bin/nvidia-smi")
	// Systemctl is systemd's.
	Systemctl = tool("systemctl", "/usr/bin/systemctl", "/bin/systemctl")
	// Modinfo and Lsmod come from kmod.
	Modinfo = tool("modinfo", "/usr/sbin/modinfo", "/sbin/modinfo")
	Lsmod   = tool("lsmod", "/usr/sbin/lsmod", "/sbin/lsmod")
	// FiInfo lives only in the EFA installer's prefix; /opt/amazon/efa/bin reaches PATH only
	// through /etc/profile.d, which Packer's non-login commands never read
	// (awsome-distributed-training PR 849, libfabric PR 11314).
	FiInfo = tool("fi_info", "/opt/amazon/efa/bin/fi_info", "/usr/bin/fi_info")
	// Findmnt and Dmesg come from util-linux.
	Findmnt = tool("findmnt", "/usr/bin/findmnt", "/bin/findmnt")
	Dmesg   = tool("dmesg", "/usr/bin/dmesg", "/bin/dmesg")
	// Journalctl is systemd's (Ubuntu 24.04: /usr/bin/journalctl; /bin on unmerged images).
	Journalctl = tool("journalctl", "/usr/bin/journalctl", "/bin/journalctl")
	// Lfs is lustre-client-utils'.
	Lfs = tool("lfs", "/usr/bin/lfs", "/usr/sbin/lfs")
	// Uname and DpkgQuery are coreutils' and dpkg's.
	Uname     = tool("uname", "/usr/bin/uname", "/bin/uname")
	DpkgQuery = tool("dpkg-query", "/usr/bin/dpkg-query")
	// Rdma is iproute2's.
	Rdma = tool("rdma", "/usr/bin/rdma", "/usr/sbin/rdma", "/sbin/rdma")
	// Dcgmi and NvHostengine are DCGM's (datacenter-gpu-manager-4 on the DLAMI).
	Dcgmi        = tool("dcgmi", "/usr/bin/dcgmi")
	NvHostengine = tool("nv-hostengine", "/usr/bin/nv-hostengine")
	// FiPingpong is fabtests', in the EFA installer's prefix.
	FiPingpong = tool("fi_pingpong", "/opt/amazon/efa/bin/fi_pingpong", "/usr/bin/fi_pingpong")
	// Mpirun is Open MPI's, from the EFA installer (host-layer.md's 1-node NCCL test).
	Mpirun = tool("mpirun", "/opt/amazon/openmpi/bin/mpirun")
	// SSH is OpenSSH's client, which Open MPI starts the other nodes' ranks with.
	SSH = tool("ssh", "/usr/bin/ssh")
	// Pkill and Pgrep stop and count a multi-node test's processes (procps).
	Pkill = tool("pkill", "/usr/bin/pkill")
	Pgrep = tool("pgrep", "/usr/bin/pgrep")
	// NvidiaCTK and NvidiaContainerCLI are the NVIDIA Container Toolkit's
	// (nvidia-container-toolkit-base, libnvidia-container-tools).
	NvidiaCTK          = tool("nvidia-ctk", "/usr/bin/nvidia-ctk")
	NvidiaContainerCLI = tool("nvidia-container-cli", "/usr/bin/nvidia-container-cli")
	// ContainerEngines are the engines the container-gpu test looks for, each at the paths
	// its packages install it (docker-ce, containerd/containerd.io, podman).
	Docker = tool("docker", "/usr/bin/docker")
	Ctr    = tool("ctr", "/usr/bin/ctr")
	Podman = tool("podman", "/usr/bin/podman")
	// NvidiaIMEXCtl is the IMEX package's query tool (grace-blackwell.md section 1.5: PCS and
	// ParallelCluster call /usr/bin/nvidia-imex-ctl).
	NvidiaIMEXCtl = tool("nvidia-imex-ctl", "/usr/bin/nvidia-imex-ctl")
	// IP is iproute2's ip (Ubuntu: /usr/sbin/ip, /sbin/ip before the usr merge): the bake's
	// one-node IMEX domain asks it for the address of the default route's interface.
	IP = tool("ip", "/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip")
	// DKMS is optional: a host without it simply has no DKMS modules.
	DKMS = bundle.Tool{Name: "dkms", Paths: []string{"/usr/sbin/dkms", "/usr/bin/dkms"}, Optional: true}
)

func tool(name string, paths ...string) bundle.Tool {
	return bundle.Tool{Name: name, Paths: paths}
}

// Ptr returns a pointer to a copy of t, for bundle.Command.Tool.
func Ptr(t bundle.Tool) *bundle.Tool { return &t }
