// Package dlami is the `dlami` provisioner: it layers software on a Deep Learning Base OSS DLAMI
// build host while asserting that the kernel and module packages stay unchanged, then validates
// the host and runs a 1-node NCCL test, and fails the bake on any drift.
package dlami

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/hashicorp/hcl/v2/hcldec"
	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
	"github.com/hashicorp/packer-plugin-sdk/template/config"
	"golang.org/x/crypto/ssh"

	"github.com/dlami-bake/packer-plugin-dlami/internal/engine"
	"github.com/dlami-bake/packer-plugin-dlami/internal/layer"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/instanceid"
	"github.com/dlami-bake/packer-plugin-dlami/internal/remote"
	"github.com/dlami-bake/packer-plugin-dlami/internal/secretfilter"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
	"github.com/dlami-bake/packer-plugin-dlami/version"
)

// Provisioner implements packersdk.Provisioner.
type Provisioner struct {
	config Config
	opt    engine.Options
}

// ConfigSpec implements packersdk.Provisioner.
func (p *Provisioner) ConfigSpec() hcldec.ObjectSpec { return p.config.FlatMapstructure().HCL2Spec() }

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
	if errs := c.prepare(); len(errs) > 0 {
		return errors.Join(errs...)
	}
	validate := true
	if c.Validate != nil {
		validate = *c.Validate
	}
	layers := make([]layer.Spec, len(c.Layers))
	for i, l := range c.Layers {
		layers[i] = l.spec()
	}
	secrets := secretfilter.New(c.secrets(layers)...).Secrets()
	// Packer's filter keeps them out of the plugin's log, secretfilter.UI out of the UI lines
	// Provision sends (layer output included), and the bake redacts its reports.
	packersdk.LogSecretFilter.Set(secrets...)
	p.opt = engine.Options{
		Common: engine.Common{
			BuildName:     c.PackerBuildName,
			PluginVersion: version.PluginVersion.FormattedVersion(),
			ReportDir:     c.ReportDir,
			InstanceType:  c.InstanceType,
			CheckTimeout:  c.CheckTimeout,
			RemoteFolder:  c.RemoteFolder,
			Policy:        c.Guard.policy(),
			Checks: settings.Checks{
				Expect: c.Expect, NCCL: c.NCCL.settings(), Function: c.function().Resolved(),
				Skip: c.SkipChecks, Warn: c.WarnChecks, SkipSetting: "skip_checks", WarnSetting: "warn_checks",
				IMEX: settings.IMEX(c.IMEX),
			},
			Secrets: secrets,
		},
		KeepGoing:     c.KeepGoing,
		HoldUnheld:    c.HoldUnheld,
		RequireHolds:  c.RequireHolds,
		Validate:      validate,
		ManifestPath:  c.ManifestPath,
		RebootTimeout: c.RebootTimeout,
		Layers:        layers,
	}
	p.opt.DeferValidation = c.DeferValidation
	if c.PreviousBOMFile != "" {
		// Read again here: prepare refused a file that is not a bill of materials.
		if p.opt.PreviousBOM, err = readPreviousBOM(c.PreviousBOMFile); err != nil {
			return err
		}
		p.opt.PreviousBOMFile = c.PreviousBOMFile
	}
	if c.SiteChecksDir != "" {
		// Read once here: prepare refused a directory that cannot serve.
		if p.opt.SiteChecks, err = readSiteChecks(c.SiteChecksDir); err != nil {
			return err
		}
	}
	p.opt.NodeCheck = c.NodeCheck
	return nil
}

// Provision implements packersdk.Provisioner. The Packer run id keys this build's baseline:
// Packer hands it to provisioners in the generated data (and the plugin's environment).
func (p *Provisioner) Provision(ctx context.Context, ui packersdk.Ui, comm packersdk.Communicator, generated map[string]interface{}) error {
	if comm == nil {
		return errors.New("dlami: no communicator: the provisioner needs SSH access to the build host")
	}
	// Every line the provisioner sends (a layer's output, apt's, the NCCL test's, the hygiene
	// report) and its error pass through the secrets first: Packer does not filter a plugin's
	// UI, and prints its error as it is.
	secrets := secretfilter.New(p.opt.Secrets...)
	ui = secrets.UI(ui)
	opt := p.opt
	opt.RunUUID = runUUID(generated)
	opt.BuildInstanceID = builderInstanceID(generated)
	opt.DescribeType = p.config.EC2.describer(generated)
	if p.config.ImageHygiene {
		opt.ImageHygiene = hygiene(generated, ui)
	}
	if opt.NodeCheck != nil && opt.NodeCheck.LoginUser == "" {
		// The node check runs as root: it judges the memlock of the user Packer logged in as.
		nc := *opt.NodeCheck
		nc.LoginUser, _ = generated["User"].(string)
		opt.NodeCheck = &nc
	}
	ctx, stop := interruptible(ctx)
	defer stop()
	return secrets.Error(engine.Run(ctx, remote.SSH{C: comm, TempDir: opt.RemoteFolder}, ui, opt))
}

// interruptible ends ctx when the plugin process gets SIGINT or SIGTERM. On Ctrl-C the
// terminal signals Packer and its plugins together, and Packer kills the plugin moments after
// cancelling, often before its cancellation reaches the provisioner over RPC: the signal is
// the earliest word the bake gets, and its report must be on disk before the kill.
func interruptible(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case <-sig:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() { signal.Stop(sig); cancel() }
}

// hygiene is image_hygiene's view of how Packer logged in: the SSH user, and the public key
// of the private key it used (the builder's temporary key, or ssh_private_key_file), so that
// only that key's authorized_keys lines are removed.
func hygiene(generated map[string]interface{}, ui packersdk.Ui) *engine.Hygiene {
	h := &engine.Hygiene{}
	h.LoginUser, _ = generated["User"].(string)
	pem, _ := generated["SSHPrivateKey"].(string)
	if pem == "" {
		if f, _ := generated["SSHPrivateKeyFile"].(string); f != "" {
			if b, err := os.ReadFile(f); err == nil {
				pem = string(b)
			} else {
				ui.Error(fmt.Sprintf("dlami: image_hygiene: reading ssh_private_key_file %s: %v (the build key cannot be removed from authorized_keys)", f, err))
			}
		}
	}
	if pem != "" {
		if signer, err := ssh.ParsePrivateKey([]byte(pem)); err == nil {
			h.BuildKey = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey())))
		} else {
			ui.Error(fmt.Sprintf("dlami: image_hygiene: the private key Packer logged in with is unreadable here (%v): the build key cannot be removed from authorized_keys", err))
		}
	}
	return h
}

// builderInstanceID is the EC2 instance the builder launched: Packer hands provisioners the
// builder's instance_id as ID (build.ID; "ERR_ID_NOT_IMPLEMENTED_BY_BUILDER" from a builder
// without one, a container id from docker). Anything that is not an EC2 instance id is "".
func builderInstanceID(generated map[string]interface{}) string {
	v, _ := generated["ID"].(string)
	id, err := instanceid.Parse(v)
	if err != nil {
		return ""
	}
	return id
}

// runUUID takes PackerRunUUID from the generated data, else from PACKER_RUN_UUID.
func runUUID(generated map[string]interface{}) string {
	if v, ok := generated["PackerRunUUID"].(string); ok && v != "" {
		return v
	}
	return os.Getenv("PACKER_RUN_UUID")
}

// secrets are the values no log, UI line or report may show: every layer's repository
// credentials and the values of its environment and of nccl.env that can be secret
// (layer.EnvSecrets: by the variable's name, inside a URL, or long enough to be a token).
func (c *Config) secrets(layers []layer.Spec) []string {
	var out []string
	for _, l := range layers {
		out = append(out, l.Secrets()...)
	}
	return append(out, layer.EnvSecrets(c.NCCL.Env)...)
}
