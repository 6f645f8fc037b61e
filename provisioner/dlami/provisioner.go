// Package dlami is the `dlami` provisioner: it layers software on a Deep Learning Base OSS DLAMI
// build host while asserting that the kernel and module packages stay on hold, then validates
// the host and runs a 1-node NCCL test, and fails the bake on any drift.
package dlami

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/hashicorp/hcl/v2/hcldec"
	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
	"github.com/hashicorp/packer-plugin-sdk/template/config"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bake"
	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/constraint"
	"github.com/dlami-bake/packer-plugin-dlami/internal/guard"
	"github.com/dlami-bake/packer-plugin-dlami/internal/layer"
	"github.com/dlami-bake/packer-plugin-dlami/internal/remote"
	"github.com/dlami-bake/packer-plugin-dlami/version"
)

// Provisioner implements packersdk.Provisioner.
type Provisioner struct {
	config Config
	opt    bake.Options
}

// ConfigSpec implements packersdk.Provisioner.
func (p *Provisioner) ConfigSpec() hcldec.ObjectSpec { return p.config.FlatMapstructure().HCL2Spec() }

var cudaVersionRE = regexp.MustCompile(`^[0-9]+\.[0-9]+$`)

// Prepare implements packersdk.Provisioner. It does no I/O beyond checking that local files
// named in the template exist.
func (p *Provisioner) Prepare(raws ...interface{}) error {
	err := config.Decode(&p.config, &config.DecodeOpts{
		PluginType:         "dlami",
		Interpolate:        true,
		InterpolateContext: &p.config.ctx,
	}, raws...)
	if err != nil {
		return err
	}
	c := &p.config
	var errs *packersdk.MultiError
	add := func(e error) { errs = packersdk.MultiErrorAppend(errs, e) }

	if c.ReportDir == "" {
		name := c.PackerBuildName
		if name == "" {
			name = "build"
		}
		c.ReportDir = filepath.Join("dlami-reports", name)
	}
	if c.CheckTimeout == 0 {
		c.CheckTimeout = 60 * time.Second
	}
	if c.CheckTimeout < time.Second {
		add(fmt.Errorf("check_timeout must be at least 1s, got %s", c.CheckTimeout))
	}
	if c.RebootTimeout == 0 {
		c.RebootTimeout = 10 * time.Minute
	}
	if c.RemoteFolder == "" {
		c.RemoteFolder = "/tmp"
	}
	if !filepath.IsAbs(c.RemoteFolder) {
		add(fmt.Errorf("remote_folder must be an absolute path, got %q", c.RemoteFolder))
	}
	if c.ManifestPath == "" {
		c.ManifestPath = "/etc/dlami-bake/manifest.json"
	}
	if !filepath.IsAbs(c.ManifestPath) {
		add(fmt.Errorf("manifest_path must be an absolute path, got %q", c.ManifestPath))
	}
	if c.Expect.NVMePath == "" {
		c.Expect.NVMePath = "/opt/dlami/nvme"
	}
	if c.NCCL.Timeout == 0 {
		c.NCCL.Timeout = 15 * time.Minute
	}
	if c.NCCL.Timeout < time.Second {
		add(fmt.Errorf("nccl.timeout must be at least 1s, got %s", c.NCCL.Timeout))
	}
	if len(c.NCCL.Args) == 0 {
		c.NCCL.Args = []string{"-b", "8", "-e", "1G", "-f", "2", "-g", "1", "-c", "1", "-n", "50"}
	}
	if c.NCCL.CUDAVersion != "" && !cudaVersionRE.MatchString(c.NCCL.CUDAVersion) {
		add(fmt.Errorf("nccl.cuda_version %q must look like \"13.2\"", c.NCCL.CUDAVersion))
	}
	if c.NCCL.Ranks < 0 {
		add(fmt.Errorf("nccl.ranks must not be negative"))
	}

	policy := guard.Policy{Include: c.Guard.Include, Exclude: c.Guard.Exclude}
	if err := policy.Validate(); err != nil {
		add(fmt.Errorf("guard: %w", err))
	}

	exists := func(path string) bool { st, err := os.Stat(path); return err == nil && !st.IsDir() }
	seen := map[string]bool{}
	layers := make([]layer.Spec, 0, len(c.Layers))
	for _, l := range c.Layers {
		spec := layer.Spec{
			Name: l.Name, AptRepositories: l.AptRepositories, AptKeys: l.AptKeys,
			AptPackages: l.AptPackages, Scripts: l.Scripts, Inline: l.Inline,
			Environment: l.Environment, Reboot: l.Reboot,
		}
		for _, f := range l.Files {
			spec.Files = append(spec.Files, layer.File{Source: f.Source, Destination: f.Destination, Mode: f.Mode})
		}
		if err := layer.Validate(spec, exists); err != nil {
			add(err)
		}
		if seen[l.Name] {
			add(fmt.Errorf("layer %q: name used twice; layer names must be unique", l.Name))
		}
		seen[l.Name] = true
		layers = append(layers, spec)
	}

	e := c.Expect
	for field, v := range map[string]string{
		"expect.nvidia_driver": e.NvidiaDriver, "expect.efa_driver": e.EFADriver,
		"expect.efa_installer": e.EFAInstaller, "expect.libfabric": e.Libfabric,
		"expect.aws_ofi_nccl": e.AWSOFINCCL, "expect.gdrcopy": e.GDRCopy, "expect.lustre": e.Lustre,
	} {
		if v == "" {
			continue
		}
		if _, err := constraint.Parse(v); err != nil {
			add(fmt.Errorf("%s: %w", field, err))
		}
	}
	for field, n := range map[string]int{"expect.gpu_count": e.GPUCount, "expect.efa_count": e.EFACount} {
		if n < 0 {
			add(fmt.Errorf("%s must not be negative, got %d", field, n))
		}
	}
	if e.BusBWFloorGBps < 0 {
		add(fmt.Errorf("expect.busbw_floor_gbps must not be negative"))
	}

	validate := true
	if c.Validate != nil {
		validate = *c.Validate
	}
	ncclOpt := checks.NCCLOptions{
		CUDAVersion: c.NCCL.CUDAVersion, Ranks: c.NCCL.Ranks, Args: c.NCCL.Args,
		TimeoutSeconds: int(c.NCCL.Timeout / time.Second), Env: c.NCCL.Env,
	}
	if _, err := checks.NCCLCommand(ncclOpt); err != nil {
		add(fmt.Errorf("nccl: %w", err))
	}
	p.opt = bake.Options{
		BuildName:     c.PackerBuildName,
		PluginVersion: version.PluginVersion.FormattedVersion(),
		ReportDir:     c.ReportDir,
		InstanceType:  c.InstanceType,
		KeepGoing:     c.KeepGoing,
		HoldUnheld:    c.HoldUnheld,
		Validate:      validate,
		CheckTimeout:  c.CheckTimeout,
		RemoteFolder:  c.RemoteFolder,
		ManifestPath:  c.ManifestPath,
		RebootTimeout: c.RebootTimeout,
		Policy:        policy,
		Layers:        layers,
		Expect: checks.Expectations{
			InstanceType: c.InstanceType,
			Kernel:       e.Kernel, NvidiaDriver: e.NvidiaDriver, EFADriver: e.EFADriver,
			EFAInstaller: e.EFAInstaller, Libfabric: e.Libfabric, AWSOFINCCL: e.AWSOFINCCL,
			GDRCopy: e.GDRCopy, Lustre: e.Lustre, GPUCount: e.GPUCount, GPUModel: e.GPUModel,
			EFACount: e.EFACount, FabricManager: e.FabricManager, NVMe: e.NVMe,
			LustreExpected: e.LustreExpected, NVMePath: e.NVMePath,
			BusBWFloorGBps: e.BusBWFloorGBps, IgnoreXids: e.IgnoreXids,
		},
		SkipNCCL: c.NCCL.Skip,
		NCCL:     ncclOpt,
	}
	if errs != nil && len(errs.Errors) > 0 {
		return errs
	}
	return nil
}

// Provision implements packersdk.Provisioner.
func (p *Provisioner) Provision(ctx context.Context, ui packersdk.Ui, comm packersdk.Communicator, _ map[string]interface{}) error {
	if comm == nil {
		return errors.New("dlami: no communicator: the provisioner needs SSH access to the build host")
	}
	return bake.Run(ctx, remote.Comm{C: comm}, ui, p.opt)
}
