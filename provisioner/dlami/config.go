//go:generate packer-sdc mapstructure-to-hcl2 -type Config,EC2Config,GuardConfig,Layer,LayerFile,NCCLConfig,EFATrafficConfig,GPUDirectRDMAConfig,ContainerCheckConfig
//go:generate packer-sdc struct-markdown

package dlami

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path"
	"time"

	"github.com/hashicorp/packer-plugin-sdk/common"
	"github.com/hashicorp/packer-plugin-sdk/template/interpolate"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/layer"
	"github.com/dlami-bake/packer-plugin-dlami/internal/nodeconf"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

// Config is the provisioner's configuration. See docs/provisioners/dlami.mdx.
type Config struct {
	common.PackerConfig `mapstructure:",squash"`

	// Local directory that receives dlami-report.json, dlami-report.junit.xml, dlami-report.md
	// and dlami-report.html. Defaults to `dlami-reports/<build name>`. Reports are written on every
	// ending: pass, fail, cancel (Ctrl-C, a CI timeout) and error.
	ReportDir string `mapstructure:"report_dir"`
	// EC2 instance type whose built-in profile supplies the default expectations, used only
	// when neither /sys/devices/virtual/dmi/id/product_name nor IMDSv2 names one.
	InstanceType string `mapstructure:"instance_type"`
	// Run every check and collect every failure instead of stopping at the first failing
	// phase. Drift after a layer always stops the bake. Defaults to false.
	KeepGoing bool `mapstructure:"keep_going"`
	// Put guarded packages that the base image does not hold on hold, and record it in the
	// report. Defaults to false: they are watched (any change fails the bake) and the holds
	// check warns.
	HoldUnheld bool `mapstructure:"hold_unheld"`
	// Fail the holds check when a guarded package is not on hold, instead of warning.
	// Defaults to false.
	RequireHolds bool `mapstructure:"require_holds"`
	// Run the host validation and the NCCL test after the layers. Defaults to true; set it to
	// false on an intermediate `dlami` provisioner that only layers and guards.
	Validate *bool `mapstructure:"validate"`
	// Two-phase bake, first phase: bake on a build instance without GPUs (a CPU instance type
	// such as c7i or m7i started from the same DLAMI) and leave the host suite and the NCCL
	// test to the `dlami` post-processor, which must set `complete_validation = true` to run
	// them on a GPU instance launched from the AMI. The guard, the layers and the last drift
	// check run here, so a build that drifts fails before any GPU instance starts. The report's
	// result is `deferred`, never `pass`, and the bill of materials records the deferral.
	// Defaults to false. Cannot be combined with `validate = false`.
	DeferValidation bool `mapstructure:"defer_validation"`
	// Timeout of each check command. Defaults to 60s.
	CheckTimeout time.Duration `mapstructure:"check_timeout"`
	// Remote directory for uploaded scripts and files; must allow execution. An absolute
	// path of letters, digits, `.`, `_`, `-` and `/`, without `..`: the upload hands it to the
	// remote shell unquoted. Each bake stages its files in a new folder inside it, created with
	// `mktemp -d` (`dlami-bake.XXXXXXXXXX`: a name nobody can guess and create first, mode 0700,
	// owned by the SSH user) and removed when the bake ends. Defaults to /tmp.
	RemoteFolder string `mapstructure:"remote_folder"`
	// Where the bill of materials is written inside the image. Defaults to
	// /etc/dlami-bake/manifest.json.
	ManifestPath string `mapstructure:"manifest_path"`
	// A previous bake's bill of materials (the `dlami-bom.json` it wrote beside its reports,
	// e.g. from the last rebake's CI artifact): the reports then say what changed since
	// (kernel, driver, CUDA, NCCL, EFA, toolkit and the guarded packages). Optional; a file
	// that cannot be read as a bill of materials fails the configuration.
	PreviousBOMFile string `mapstructure:"previous_bom_file"`
	// How long a reboot (asked for with `reboot`, or done by a layer's own scripts) may take
	// before the host must answer again. Defaults to 10m.
	RebootTimeout time.Duration `mapstructure:"reboot_timeout"`

	// How the bake reads EC2's description of the build instance's type
	// (ec2:DescribeInstanceTypes): the AWS access, the region, or skip.
	EC2 EC2Config `mapstructure:"ec2"`
	// Which packages the kernel hold guard watches, on top of the defaults.
	Guard GuardConfig `mapstructure:"guard"`
	// Ordered layers, run one after another; the drift check runs after each.
	Layers []Layer `mapstructure:"layer"`
	// What the host must look like; unset values come from the instance type's profile, then
	// from the host's PCI inventory.
	Expect settings.Expectations `mapstructure:"expect"`
	// The 1-node NCCL all-reduce test.
	NCCL NCCLConfig `mapstructure:"nccl"`
	// DCGM diagnostics level: `dcgmi diag -r <level>` after the NCCL test. 0 turns them off;
	// 1 is quick (seconds), 2 (the default, about two minutes) the production gate of AWS's GPU
	// cluster health check, 3 long (about 15 minutes), 4 extended (NVIDIA's DCGM
	// documentation). With a level above 0 and DCGM missing, the dcgm check fails; with MIG
	// enabled on a GPU it is skipped, naming why (dcgmi diag does not run under MIG).
	DCGMLevel *int `mapstructure:"dcgm_level"`
	// The EFA traffic test: an RDM ping-pong across every EFA device.
	EFATraffic EFATrafficConfig `mapstructure:"efa_traffic"`
	// The GPUDirect RDMA test: an all-reduce with NVLink and shared memory off, over the EFA
	// devices.
	GPUDirectRDMA GPUDirectRDMAConfig `mapstructure:"gpudirect_rdma"`
	// The container-gpu check: a container started with all GPUs on each engine of the image
	// (Docker, containerd, podman), which must see exactly the host's GPUs. It never pulls: set
	// `image` to an image a layer already put in the engines' stores, or `rootfs` for
	// containerd; without either the check warns `not judged: no local image`. Carried by the
	// bill of materials into the post-processor's verification and the node check.
	ContainerCheck ContainerCheckConfig `mapstructure:"container_check"`
	// Install dlami-node-check into the image with a systemd unit that judges every boot
	// against this bake's bill of materials. Off unless the block is set.
	NodeCheck *nodeconf.Config `mapstructure:"node_check"`
	// Check ids not to judge, in this bake and (carried by the bill of materials) in the
	// post-processor's verification and every node's check: each is reported `skip` with this
	// setting named, never `pass`. The guard's checks (`kernel`, `holds`, `packages`,
	// `next-boot-kernel`, `dkms`, `first-boot-*`) cannot be skipped. A site check is
	// `site:<file name>`.
	SkipChecks []string `mapstructure:"skip_checks"`
	// Check ids whose failure is reported as a warning (its message says it would have failed),
	// here, in the verification and on every node. The guard's checks cannot be demoted.
	WarnChecks []string `mapstructure:"warn_checks"`
	// Local directory of site checks: executables installed into the image at
	// /etc/dlami-bake/site-checks.d/ and run as root in the host phase of this bake, the
	// post-processor's first-boot verification and every node check, each bounded by
	// `check_timeout`. Exit 0 passes, 1 fails, 2 warns (node-problem-detector's custom plugin
	// convention, with its "unknown" read as a warning); any other status, a timeout or a file
	// that cannot run fails. The last line of its output is the check's message, the output its
	// evidence. Each file's name (letters, digits, `.`, `_`, `-`) makes its id: `site:<name>`.
	SiteChecksDir string `mapstructure:"site_checks_dir"`
	// Clean the image as the last step of this provisioner, after the bill of materials: remove
	// the key Packer logged in with from the SSH user's and root's `authorized_keys` (other keys
	// stay), the SSH host keys, the machine id (`/etc/machine-id` emptied), cloud-init's instance
	// state, logs and shell history, then check they are gone (check `image-hygiene`). It takes
	// the build's SSH access away: set it on the last `dlami` provisioner of the build, after
	// every provisioner that needs SSH. Defaults to false.
	ImageHygiene bool `mapstructure:"image_hygiene"`
	// Who owns NVIDIA IMEX, the service multi-node NVLink depends on: `host` (the image's own
	// `nvidia-imex` service, as Slurm, ParallelCluster and PCS run it: check `imex` requires the
	// package to match the loaded driver, the unit enabled, channel 0 created at boot, and a
	// healthy domain where one runs), `dra` (the EKS DRA driver runs its own IMEX daemons: the
	// host unit must be disabled and masked, else `NV_ERR_IN_USE`) or `off` (not judged).
	// Defaults to `host` on multi-node NVLink types (p6e-gb200) and `off` elsewhere. Carried by
	// the bill of materials into the post-processor's verification and the node check.
	IMEX string `mapstructure:"imex"`

	ctx interpolate.Context
}

// The default this package alone owns; check_timeout, remote_folder and report_dir default
// through internal/settings, which the post-processor shares, and the others belong to the
// packages that use them.
const defaultRebootTimeout = 10 * time.Minute

// GuardConfig adjusts the set of guarded packages.
type GuardConfig struct {
	// Glob patterns of extra packages to guard (must stay unchanged; held where the image
	// holds). Wins over the default exclusions (the NVIDIA container toolkit).
	Include []string `mapstructure:"include"`
	// Glob patterns removed from the guarded set.
	Exclude []string `mapstructure:"exclude"`
}

func (g GuardConfig) policy() settings.GuardPolicy {
	return settings.GuardPolicy{Include: g.Include, Exclude: g.Exclude}
}

// Validate reports every bad pattern, in order.
func (g GuardConfig) Validate() []error { return g.policy().Validate() }

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
	// Environment for scripts and inline commands. A value that can be secret (see the
	// provisioner docs' Secrets section: credential-like names, long tokens) is never printed.
	Environment map[string]string `mapstructure:"environment"`
	// Reboot after the layer, wait for the host, and check the running kernel.
	Reboot bool `mapstructure:"reboot"`
	// The layer's own scripts reboot the host (vendor installers often do): wait for it to
	// come back (reboot_timeout) and go on with the drift check. Without it, a reboot during
	// the layer fails the bake and says so.
	ExpectReboot bool `mapstructure:"expect_reboot"`
}

// spec builds the layer's internal form.
func (l Layer) spec() layer.Spec {
	s := layer.Spec{
		Name: l.Name, AptRepositories: l.AptRepositories, AptKeys: l.AptKeys,
		AptPackages: l.AptPackages, Scripts: l.Scripts, Inline: l.Inline,
		Environment: l.Environment, Reboot: l.Reboot, ExpectReboot: l.ExpectReboot,
	}
	for _, f := range l.Files {
		s.Files = append(s.Files, layer.File{Source: f.Source, Destination: f.Destination, Mode: f.Mode})
	}
	return s
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

// EFATrafficConfig controls the EFA traffic test: for every EFA device, an RDM fi_pingpong
// between a server and a client on that device with FI_EFA_ENABLE_SHM_TRANSFER=0, so the bytes
// cross the device instead of libfabric's shared-memory path.
type EFATrafficConfig struct {
	// Skip the test.
	Skip bool `mapstructure:"skip"`
	// Lowest acceptable bandwidth per device, in MB/s (fi_pingpong's MB/sec at 64 KiB). Without
	// it the figures are reported with a warning.
	MinBandwidthMBps float64 `mapstructure:"min_bandwidth_mbps"`
	// Bound of one device's ping-pong. Defaults to 60s.
	Timeout time.Duration `mapstructure:"timeout"`
	// Devices tested at once. Defaults to 8 (32 devices on p5 take four rounds).
	Concurrency int `mapstructure:"concurrency"`
}

// GPUDirectRDMAConfig controls the GPUDirect RDMA test on EFA hosts.
type GPUDirectRDMAConfig struct {
	// Skip the test.
	Skip bool `mapstructure:"skip"`
	// Lowest acceptable bus bandwidth of the forced-network all-reduce, in GB/s. Without it the
	// figure is reported with a warning.
	BusBWFloorGBps float64 `mapstructure:"busbw_floor_gbps"`
}

// ContainerCheckConfig controls the container-gpu check.
type ContainerCheckConfig struct {
	// Skip the check.
	Skip bool `mapstructure:"skip"`
	// An image already in each engine's local store (docker, containerd's
	// `containerd_namespace`, podman), e.g. `public.ecr.aws/amazonlinux/amazonlinux:2023-minimal`
	// loaded by a layer: any image works, the toolkit injects `nvidia-smi` and the driver
	// libraries. Never pulled.
	Image string `mapstructure:"image"`
	// A root filesystem directory on the image (with a libc) that containerd runs with `ctr
	// run --rootfs`, for images without a container image.
	Rootfs string `mapstructure:"rootfs"`
	// containerd's namespace of `image`. Defaults to "default" (kubelet's images are in
	// "k8s.io").
	ContainerdNamespace string `mapstructure:"containerd_namespace"`
	// Bound of one container's run. Defaults to 2m.
	Timeout time.Duration `mapstructure:"timeout"`
}

// function builds the function tests' settings as the template wrote them; an unset
// dcgm_level takes settings' default.
func (c *Config) function() settings.Function {
	level := settings.DefaultDCGMLevel
	if c.DCGMLevel != nil {
		level = settings.DCGMLevel(*c.DCGMLevel)
	}
	return settings.Function{
		DCGMLevel: level,
		EFATraffic: settings.EFATraffic{Skip: c.EFATraffic.Skip, MinBandwidthMBps: c.EFATraffic.MinBandwidthMBps,
			Timeout: c.EFATraffic.Timeout, Concurrency: c.EFATraffic.Concurrency},
		GDR: settings.GDR{Skip: c.GPUDirectRDMA.Skip, BusBWFloorGBps: c.GPUDirectRDMA.BusBWFloorGBps},
		Container: settings.ContainerCheck{Skip: c.ContainerCheck.Skip, Image: c.ContainerCheck.Image, Rootfs: c.ContainerCheck.Rootfs,
			Namespace: c.ContainerCheck.ContainerdNamespace, Timeout: c.ContainerCheck.Timeout},
	}
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
	// Extra environment passed to the ranks with mpirun -x. A value that can be secret (see
	// the Secrets section) is never printed, and none is written into the image.
	Env map[string]string `mapstructure:"env"`
	// What nccl-transport requires: `efa` (aws-ofi-nccl over EFA) or `any` (whatever NCCL
	// chose on one node, reported). Defaults to `efa` when the host has EFA devices (or the
	// settings or profile expect them) and `any` otherwise.
	Transport string `mapstructure:"transport"`
}

// settings builds the NCCL test's settings as the template wrote them; zero values take
// settings' defaults.
func (n NCCLConfig) settings() settings.NCCL {
	return settings.NCCL{
		Skip: n.Skip, CUDAVersion: n.CUDAVersion, Ranks: n.Ranks, Args: n.Args,
		Timeout: n.Timeout, Env: n.Env, Transport: settings.Transport(n.Transport),
	}
}

// Validate reports every bad setting of the nccl block, in order, each naming the setting as
// the template spells it.
func (n NCCLConfig) Validate() []error {
	if _, err := n.settings().Resolved(); err != nil {
		return []error{err}
	}
	return nil
}

// prepare fills in the defaults this package owns and validates every block in a fixed order.
func (c *Config) prepare() []error {
	c.ReportDir = cmp.Or(c.ReportDir, settings.ReportDir(c.PackerBuildName))
	c.CheckTimeout = settings.CheckTimeout(c.CheckTimeout)
	c.RebootTimeout = cmp.Or(c.RebootTimeout, defaultRebootTimeout)
	c.RemoteFolder = settings.RemoteFolder(c.RemoteFolder)
	c.ManifestPath = cmp.Or(c.ManifestPath, bom.DefaultPath)
	var errs []error
	if c.CheckTimeout < time.Second {
		errs = append(errs, fmt.Errorf("check_timeout must be at least 1s, got %s", c.CheckTimeout))
	}
	if err := settings.CheckRemoteFolder("remote_folder", c.RemoteFolder); err != nil {
		errs = append(errs, err)
	}
	if !path.IsAbs(c.ManifestPath) {
		errs = append(errs, fmt.Errorf("manifest_path must be an absolute path, got %q", c.ManifestPath))
	}
	if c.PreviousBOMFile != "" {
		if _, err := readPreviousBOM(c.PreviousBOMFile); err != nil {
			errs = append(errs, err)
		}
	}
	if c.DeferValidation && c.Validate != nil && !*c.Validate {
		errs = append(errs, errors.New("defer_validation = true and validate = false: choose one (defer_validation leaves the host suite and the NCCL test to the post-processor's complete_validation = true; validate = false runs no validation at all)"))
	}
	if c.HoldUnheld && c.RequireHolds {
		errs = append(errs, errors.New("hold_unheld and require_holds: choose one (hold_unheld holds what the image does not; require_holds fails on it)"))
	}
	errs = append(errs, c.Guard.Validate()...)
	seen := map[string]bool{}
	exists := func(p string) bool { st, err := os.Stat(p); return err == nil && !st.IsDir() }
	for _, l := range c.Layers {
		if err := layer.Validate(l.spec(), exists); err != nil {
			errs = append(errs, err)
		}
		if seen[l.Name] {
			errs = append(errs, fmt.Errorf("layer %q: name used twice; layer names must be unique", l.Name))
		}
		seen[l.Name] = true
	}
	errs = append(errs, c.Expect.Validate()...)
	errs = append(errs, c.EC2.prepare()...)
	errs = append(errs, c.NCCL.Validate()...)
	errs = append(errs, c.function().Validate("")...)
	if err := settings.IMEX(c.IMEX).Validate(settings.IMEXSetting); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, checks.CheckSelection("skip_checks", c.SkipChecks)...)
	errs = append(errs, checks.CheckSelection("warn_checks", c.WarnChecks)...)
	if c.SiteChecksDir != "" {
		if _, err := readSiteChecks(c.SiteChecksDir); err != nil {
			errs = append(errs, err)
		}
	}
	if c.NodeCheck != nil {
		errs = append(errs, c.prepareNodeCheck()...)
	}
	return errs
}

// readPreviousBOM reads previous_bom_file.
func readPreviousBOM(file string) (*bom.BOM, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("previous_bom_file: %w (give the dlami-bom.json a previous bake wrote beside its reports, or leave the setting out)", err)
	}
	b, err := bom.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("previous_bom_file %s: %w (give the dlami-bom.json a previous bake wrote beside its reports, or leave the setting out)", file, err)
	}
	return &b, nil
}
