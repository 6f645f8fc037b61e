// Command dlami-node-check judges the node it runs on against the bill of materials of the
// image it booted from: the provisioner's host suite with the bake's expectations, the running
// and next-boot kernel and every guarded package's version and hold, memlock where jobs run,
// the image's site checks, and optionally the 1-node NCCL test, DCGM's diagnostics, the EFA
// traffic test and the GPUDirect RDMA all-reduce. The dlami provisioner installs it (node_check) with a
// systemd unit that runs it at every boot; Slurm (HealthCheckProgram), node-problem-detector
// (custom plugin) and node_exporter (textfile) use the same command. Linux only; built
// statically (CGO_ENABLED=0) for amd64 and arm64 and shipped inside the plugin.
//
//	dlami-node-check [--mode boot|report|slurm|npd] [--action block|drain|report] [--json]
//	                 [--config FILE] [--bom FILE] [--out DIR] [--textfile FILE.prom]
//	                 [--timeout 5m] [--check-timeout 60s] [--nccl] [--dcgm-level N]
//	                 [--efa-traffic] [--gpudirect-rdma] [--container-gpu] [--skip-checks IDS] [--warn-checks IDS]
//	                 [--scontrol PATH] [--login-user USER]
//	                 [--replace none|asg] [--npd-condition TYPE] [--evidence-dir DIR]
//	                 [--evidence-s3-uri s3://BUCKET/PREFIX] [--simulate-failure CHECK]
//	                 [--simulate-failure-replace]
//
// A failing node's evidence (the kernel log around each Xid, nvidia-smi -q, NVIDIA's bug
// report, the instance's identity, the report) is kept before it is isolated, and uploaded
// when evidence s3_uri is set; with replace asg its Auto Scaling group is asked to replace it.
// --simulate-failure CHECK drills that whole pipeline: CHECK fails on purpose, every output
// says simulated, and no hardware is touched (no load or function test runs). A drill finds
// the node's Auto Scaling group but does not send SetInstanceHealth (the group would terminate
// the node) unless --simulate-failure-replace is given too.
//
// Exit status: 0 the node passed; 1 it failed (npd: the problem status); 2 bad usage (npd:
// unknown). In slurm mode a failed node that was drained exits 0, as Slurm's contract asks of
// a HealthCheckProgram that acts itself.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/localhost"
	"github.com/dlami-bake/packer-plugin-dlami/internal/nodeaws"
	"github.com/dlami-bake/packer-plugin-dlami/internal/nodecheck"
	"github.com/dlami-bake/packer-plugin-dlami/internal/nodeconf"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
	"github.com/dlami-bake/packer-plugin-dlami/version"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, realEnv())
	stop()
	os.Exit(code)
}

func realEnv() nodecheck.Env {
	return nodecheck.Env{
		Host: localhost.Host{}, Command: localhost.Command, ReadFile: os.ReadFile, Hostname: os.Hostname, Getenv: os.Getenv, Now: time.Now,
		Cloud: nodeaws.New(nodeaws.Options{}),
	}
}

// run is main without the process: flags, the config file, the engine, the output.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, env nodecheck.Env) int {
	fl := flag.NewFlagSet("dlami-node-check", flag.ContinueOnError)
	fl.SetOutput(stderr)
	mode := fl.String("mode", string(nodeconf.ModeReport), "boot (the systemd unit), report, slurm (HealthCheckProgram) or npd (node-problem-detector custom plugin)")
	configPath := fl.String("config", nodeconf.ConfigPath, "the settings the provisioner installed; flags override them")
	action := fl.String("action", "", "on a failure in boot mode: block, drain or report (default: the config's, else block)")
	bomPath := fl.String("bom", "", "the bill of materials (default: the config's, else "+bom.DefaultPath+")")
	outDir := fl.String("out", "", "directory for dlami-report.json, .junit.xml and .md (default: the config's, else "+nodeconf.DefaultOutDir+")")
	textfile := fl.String("textfile", "", "node_exporter textfile to write (*.prom), or none (default: the config's, else "+nodeconf.DefaultTextfile+")")
	timeout := fl.Duration("timeout", 0, "bound of the whole run; reaching it fails the node (10s to 1h, as node_check.timeout; default: the config's, else 5m; slurm mode at most 50s)")
	checkTimeout := fl.Duration("check-timeout", 0, "bound of each probe command (default: the config's, else 60s)")
	nccl := fl.Bool("nccl", false, "run the 1-node NCCL test too (default: the config's)")
	dcgmLevel := fl.Int("dcgm-level", 0, "run DCGM's diagnostics at this level too, 0 off (default: the config's)")
	efaTraffic := fl.Bool("efa-traffic", false, "run the EFA traffic test too (default: the config's)")
	gdr := fl.Bool("gpudirect-rdma", false, "run the GPUDirect RDMA all-reduce too (default: the config's)")
	containerGPU := fl.Bool("container-gpu", false, "run the container-gpu check too (default: the config's)")
	skipChecks := fl.String("skip-checks", "", "comma-separated check ids not to judge, on top of the bake's (default: the config's)")
	warnChecks := fl.String("warn-checks", "", "comma-separated check ids whose failure only warns, on top of the bake's (default: the config's)")
	scontrol := fl.String("scontrol", "", "Slurm's scontrol (default: the config's, else "+nodeconf.DefaultScontrol+")")
	loginUser := fl.String("login-user", "", "the user whose new logins the memlock check judges (default: the config's, the bake's SSH user)")
	replace := fl.String("replace", "", "who replaces a failing node: none or asg (default: the config's, else none)")
	npdCondition := fl.String("npd-condition", "", "the node condition the npd mode answers: "+strings.Join(nodeconf.NPDConditions, " or ")+" (default: the config's)")
	evidenceDir := fl.String("evidence-dir", "", "where a failing node's evidence bundles are kept (default: the config's, else "+nodeconf.DefaultEvidenceDir+")")
	evidenceS3 := fl.String("evidence-s3-uri", "", "s3://BUCKET[/PREFIX] to upload each evidence bundle to (default: the config's)")
	simulateFailure := fl.String("simulate-failure", "", "fail this check on purpose to drill the pipeline (evidence, drain, condition, metrics, replacement), marked simulated in every output")
	simulateReplace := fl.Bool("simulate-failure-replace", false, "let a --simulate-failure drill send the replacement request (SetInstanceHealth Unhealthy: the Auto Scaling group terminates and replaces this node); without it the drill stops before sending")
	asJSON := fl.Bool("json", false, "print the report as JSON on stdout instead of the one-line verdict")
	showVersion := fl.Bool("version", false, "print the version and exit")
	usage := 2
	if err := fl.Parse(args); err != nil {
		return usage
	}
	if *showVersion {
		fmt.Fprintln(stdout, "dlami-node-check "+version.PluginVersion.FormattedVersion())
		return 0
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "dlami-node-check: unexpected argument %q\n", fl.Arg(0))
		return usage
	}
	set := map[string]bool{}
	fl.Visit(func(f *flag.Flag) { set[f.Name] = true })

	cfg, err := readConfig(env, *configPath, set["config"])
	if err != nil {
		fmt.Fprintln(stderr, "dlami-node-check: "+err.Error())
		if nodeconf.Mode(*mode) == nodeconf.ModeNPD {
			fmt.Fprintln(stdout, "DLAMI node check could not run: bad config")
			return nodeconf.NPDUnknown
		}
		return usage
	}
	// The installed file's settings, resolved by the provisioner's own rule, with the flags
	// given over them; validated below by the provisioner's own rule too.
	o := nodecheck.Options{Config: cfg.Resolved(), Mode: nodeconf.Mode(*mode), Version: version.PluginVersion.FormattedVersion()}
	apply := map[string]func(){
		"action": func() { o.Action = nodeconf.Action(*action) }, "bom": func() { o.BOMPath = *bomPath }, "out": func() { o.OutDir = *outDir },
		"textfile": func() { o.Textfile = *textfile }, "timeout": func() { o.Timeout = *timeout },
		"check-timeout": func() { o.CheckTimeout = *checkTimeout }, "nccl": func() { o.NCCL = *nccl }, "scontrol": func() { o.Scontrol = *scontrol },
		"login-user": func() { o.LoginUser = *loginUser },
		"dcgm-level": func() { o.DCGMLevel = settings.DCGMLevel(*dcgmLevel) }, "efa-traffic": func() { o.EFATraffic = *efaTraffic },
		"gpudirect-rdma": func() { o.GPUDirectRDMA = *gdr },
		"container-gpu":  func() { o.ContainerGPU = *containerGPU },
		"skip-checks":    func() { o.SkipChecks = idList(*skipChecks) }, "warn-checks": func() { o.WarnChecks = idList(*warnChecks) },
		"replace": func() { o.Replace = *replace }, "npd-condition": func() { o.NPDCondition = *npdCondition },
		"evidence-dir": func() { o.Evidence.Dir = *evidenceDir }, "evidence-s3-uri": func() { o.Evidence.S3URI = *evidenceS3 },
		"simulate-failure": func() { o.Simulate = *simulateFailure }, "simulate-failure-replace": func() { o.SimulateReplace = *simulateReplace },
	}
	for name, f := range apply {
		if set[name] {
			f()
		}
	}
	if o.Mode == nodeconf.ModeSlurm && o.Timeout > nodeconf.SlurmTimeout {
		// Slurm kills a HealthCheckProgram after 60 seconds.
		o.Timeout = nodeconf.SlurmTimeout
	}
	if err := o.Validate(); err != nil {
		fmt.Fprintln(stderr, "dlami-node-check: "+err.Error())
		if o.Mode == nodeconf.ModeNPD {
			fmt.Fprintln(stdout, "DLAMI node check could not run: bad flags")
			return nodeconf.NPDUnknown
		}
		return usage
	}
	out := nodecheck.Run(ctx, env, o)
	for _, n := range out.Notes {
		fmt.Fprintln(stderr, "dlami-node-check: "+n)
	}
	if *asJSON {
		js, err := report.JSON(out.Report)
		if err != nil {
			fmt.Fprintln(stderr, "dlami-node-check: "+err.Error())
			return 1
		}
		_, _ = stdout.Write(js)
		fmt.Fprintln(stderr, out.Line)
	} else {
		fmt.Fprintln(stdout, out.Line)
	}
	return out.Exit
}

// readConfig reads the config file; a missing default one means the built-in defaults, a
// missing one named with --config is an error.
func readConfig(env nodecheck.Env, path string, explicit bool) (nodeconf.Config, error) {
	data, err := env.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !explicit:
		return nodeconf.Config{}, nil
	case err != nil:
		return nodeconf.Config{}, fmt.Errorf("--config %s: %w", path, err)
	}
	c, err := nodeconf.DecodeConfig(data)
	if err != nil {
		return nodeconf.Config{}, fmt.Errorf("--config %s: %w", path, err)
	}
	return c, nil
}

// idList splits a comma-separated list of check ids.
func idList(s string) []string {
	var ids []string
	for _, id := range strings.Split(s, ",") {
		if id = strings.TrimSpace(id); id != "" {
			ids = append(ids, id)
		}
	}
	return ids
}
