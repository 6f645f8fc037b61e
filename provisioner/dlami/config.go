//go:generate packer-sdc mapstructure-to-hcl2 -type Config,GuardConfig,Layer,LayerFile,ExpectConfig,NCCLConfig
//go:generate packer-sdc struct-markdown

package dlami

import (
	"time"

	"github.com/hashicorp/packer-plugin-sdk/common"
	"github.com/hashicorp/packer-plugin-sdk/template/interpolate"
)

// Config is the provisioner's configuration. See docs/provisioners/dlami.mdx.
type Config struct {
	common.PackerConfig `mapstructure:",squash"`

	// Local directory that receives dlami-report.json, dlami-report.junit.xml and
	// dlami-report.md. Defaults to `dlami-reports/<build name>`. Reports are written even when
	// the bake fails.
	ReportDir string `mapstructure:"report_dir"`
	// EC2 instance type whose built-in profile supplies the default expectations, used only
	// when neither /sys/devices/virtual/dmi/id/product_name nor IMDSv2 names one.
	InstanceType string `mapstructure:"instance_type"`
	// Run every check and collect every failure instead of stopping at the first failing
	// phase. Drift after a layer always stops the bake. Defaults to false.
	KeepGoing bool `mapstructure:"keep_going"`
	// Put guarded packages that are not on hold on hold (and record it in the report) instead
	// of failing. Defaults to false: an unheld kernel fails the bake before any layer runs.
	HoldUnheld bool `mapstructure:"hold_unheld"`
	// Run the host validation and the NCCL test after the layers. Defaults to true; set it to
	// false on an intermediate `dlami` provisioner that only layers and guards.
	Validate *bool `mapstructure:"validate"`
	// Timeout of each check command. Defaults to 60s.
	CheckTimeout time.Duration `mapstructure:"check_timeout"`
	// Remote directory for uploaded scripts and files; must allow execution. Defaults to /tmp.
	RemoteFolder string `mapstructure:"remote_folder"`
	// Where the bill of materials is written inside the image. Defaults to
	// /etc/dlami-bake/manifest.json.
	ManifestPath string `mapstructure:"manifest_path"`
	// How long a reboot may take before the host must answer again. Defaults to 10m.
	RebootTimeout time.Duration `mapstructure:"reboot_timeout"`

	// Which packages the kernel hold guard watches, on top of the defaults.
	Guard GuardConfig `mapstructure:"guard"`
	// Ordered layers, run one after another; the drift check runs after each.
	Layers []Layer `mapstructure:"layer"`
	// What the host must look like; unset values come from the instance type's profile.
	Expect ExpectConfig `mapstructure:"expect"`
	// The 1-node NCCL all-reduce test.
	NCCL NCCLConfig `mapstructure:"nccl"`

	ctx interpolate.Context
}

// GuardConfig adjusts the set of guarded packages.
type GuardConfig struct {
	// Glob patterns of extra packages to guard (must stay held and unchanged).
	Include []string `mapstructure:"include"`
	// Glob patterns removed from the guarded set.
	Exclude []string `mapstructure:"exclude"`
}

// Layer is one named step of the bake.
type Layer struct {
	// Name shown in the UI, the report and drift messages. Required, unique.
	Name string `mapstructure:"name" required:"true"`
	// Lines written to /etc/apt/sources.list.d/dlami-<name>.list before installing.
	AptRepositories []string `mapstructure:"apt_repositories"`
	// Local key files installed into /etc/apt/keyrings/ (reference them with signed-by=).
	AptKeys []string `mapstructure:"apt_keys"`
	// Packages installed with apt-get install (holds are respected; name or name=version).
	AptPackages []string `mapstructure:"apt_packages"`
	// Local files installed at a remote destination (as root).
	Files []LayerFile `mapstructure:"file"`
	// Local scripts uploaded and run as root, in order.
	Scripts []string `mapstructure:"scripts"`
	// Commands run as root by /bin/sh -e, in order.
	Inline []string `mapstructure:"inline"`
	// Environment for scripts and inline commands. Values are never printed.
	Environment map[string]string `mapstructure:"environment"`
	// Reboot after the layer, wait for the host, and check the running kernel.
	Reboot bool `mapstructure:"reboot"`
}

// LayerFile is one file a layer installs.
type LayerFile struct {
	// Local path of the file.
	Source string `mapstructure:"source" required:"true"`
	// Absolute remote path.
	Destination string `mapstructure:"destination" required:"true"`
	// Octal mode, default "0644".
	Mode string `mapstructure:"mode"`
}

// ExpectConfig pins what the host must look like. Versions take an exact value or a constraint
// such as ">= 3.3.0". Unset values come from the instance type's profile.
type ExpectConfig struct {
	// Running kernel, exact (`uname -r`).
	Kernel string `mapstructure:"kernel"`
	// NVIDIA driver version or constraint.
	NvidiaDriver string `mapstructure:"nvidia_driver"`
	// EFA kernel driver version or constraint (`modinfo -F version efa`).
	EFADriver string `mapstructure:"efa_driver"`
	// EFA installer version or constraint (/opt/amazon/efa_installed_packages).
	EFAInstaller string `mapstructure:"efa_installer"`
	// libfabric version or constraint.
	Libfabric string `mapstructure:"libfabric"`
	// aws-ofi-nccl version or constraint.
	AWSOFINCCL string `mapstructure:"aws_ofi_nccl"`
	// GDRCopy (gdrdrv module) version or constraint.
	GDRCopy string `mapstructure:"gdrcopy"`
	// Lustre client version or constraint.
	Lustre string `mapstructure:"lustre"`
	// Number of GPUs.
	GPUCount int `mapstructure:"gpu_count"`
	// GPU model, matched as a whole word of the nvidia-smi name, case-insensitively ("B200").
	GPUModel string `mapstructure:"gpu_model"`
	// Number of EFA devices.
	EFACount int `mapstructure:"efa_count"`
	// Whether Fabric Manager must be active.
	FabricManager *bool `mapstructure:"fabric_manager"`
	// Whether local NVMe must be mounted at nvme_path.
	NVMe *bool `mapstructure:"nvme"`
	// Where local NVMe is mounted. Defaults to /opt/dlami/nvme.
	NVMePath string `mapstructure:"nvme_path"`
	// Whether the Lustre client must be installed (FSx for Lustre).
	LustreExpected *bool `mapstructure:"lustre_expected"`
	// Lowest acceptable 1-node all-reduce busbw in GB/s at the largest size.
	BusBWFloorGBps float64 `mapstructure:"busbw_floor_gbps"`
	// XID numbers that do not fail the xid check (still reported).
	IgnoreXids []int `mapstructure:"ignore_xids"`
}

// NCCLConfig controls the 1-node NCCL test.
type NCCLConfig struct {
	// Skip the NCCL test.
	Skip bool `mapstructure:"skip"`
	// CUDA version of the nccl-tests build to use ("13.2"). Defaults to the newest found.
	CUDAVersion string `mapstructure:"cuda_version"`
	// MPI ranks. Defaults to the expected GPU count.
	Ranks int `mapstructure:"ranks"`
	// all_reduce_perf arguments. Defaults to -b 8 -e 1G -f 2 -g 1 -c 1 -n 50.
	Args []string `mapstructure:"args"`
	// Kills a hung test. Defaults to 15m.
	Timeout time.Duration `mapstructure:"timeout"`
	// Extra environment passed to the ranks with mpirun -x. Values are never printed.
	Env map[string]string `mapstructure:"env"`
}
