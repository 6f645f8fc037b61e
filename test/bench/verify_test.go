package bench

import (
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	sshcomm "github.com/hashicorp/packer-plugin-sdk/sdk-internals/communicator/ssh"
	"golang.org/x/crypto/ssh"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/engine"
	"github.com/dlami-bake/packer-plugin-dlami/internal/host"
	"github.com/dlami-bake/packer-plugin-dlami/internal/launch"
	"github.com/dlami-bake/packer-plugin-dlami/internal/remote"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
	"github.com/dlami-bake/packer-plugin-dlami/test/simfleet"
)

// timedHost records how long each job (a test the engine runs on the host) took.
type timedHost struct {
	host.Host
	mu   sync.Mutex
	took map[string]time.Duration
}

func (h *timedHost) Run(ctx context.Context, j host.Job) (int, error) {
	start := time.Now()
	code, err := h.Host.Run(ctx, j)
	h.mu.Lock()
	h.took[j.Name] += time.Since(start)
	h.mu.Unlock()
	return code, err
}

// sourced is what a stage takes on AWS where a public source says, for the estimate beside the
// simulation's wall time (the stand-ins compress some stages: DCGM's level 2 sleeps a second).
var sourced = map[string]struct {
	real   time.Duration
	source string
}{
	"the DCGM diagnostics": {2 * time.Minute, "DCGM documentation, run levels: level 2 takes about two minutes (settings.DCGMLevel)"},
}

// stageNote says how the simulation models a stage that has no sourced duration of its own.
var stageNote = map[string]string{
	"the EFA traffic test":          "modelled: every transfer at the sourced 14.35 µs per 64 KiB (an EFA installer's efa_test.sh log); process starts and connections are the simulation's",
	"the NCCL test":                 "UNSOURCED: the stand-in runs its collectives for nccl-seconds (1 s)",
	"the GPUDirect RDMA all-reduce": "UNSOURCED: the stand-in runs its collectives for nccl-seconds (1 s)",
}

// BenchmarkP5VerificationStages is the dlami post-processor's verification of a p5.48xlarge as
// it runs with complete_validation = true (the two-phase example's), with every EFA attached:
// internal/launch launches it through the fake EC2 (DescribeInstanceTypes, the User Guide's P5
// layout: 33 interfaces, 32 EFA, in one RunInstances), whose simulated host shows the 32
// devices; the first phase of a two-phase bake writes the bill of materials; then engine.Verify runs the
// first boot, the host suite, the NCCL test, DCGM's level 2 and the EFA traffic test alongside,
// and GPUDirect RDMA, over real SSH. It reports the wall time of each stage (s/<stage>), the
// whole verification (s/verify), and an estimate of the same on AWS (s/estimate-on-aws): the
// simulation's wall time with each stage that has a sourced duration replaced by it. Goal:
// under 5 minutes on AWS. Run with `make bench` as root.
func BenchmarkP5VerificationStages(b *testing.B) {
	root := repoRoot(b)
	if !canBoot(b, root) {
		return
	}
	api, ami := simulatedEC2(b, root)

	var totals map[string]time.Duration
	var verifyTook time.Duration
	for b.Loop() {
		ctx := context.Background()
		in, err := launch.Launch(ctx, api, launch.Spec{ImageID: ami, InstanceType: "p5.48xlarge", EFA: launch.EFAAll, EFASetting: `efa = "all"`,
			SSHCIDR: "127.0.0.0/8", Poll: 100 * time.Millisecond}, func(string) {})
		if err != nil {
			b.Fatal(err)
		}
		if in.Layout.EFA != 32 || len(in.Layout.Interfaces) != 33 {
			b.Fatalf("layout %s: want the P5 layout's 32 EFA", in.Layout)
		}
		h := &timedHost{Host: sshTo(b, in), took: map[string]time.Duration{}}
		common := benchCommon()
		doc := writeBOM(ctx, b, h, common)
		common.ReportDir = b.TempDir()
		common.Checks = doc.Checks.Overlay(settings.Overlay{NCCL: settings.RunOn, DCGM: settings.RunAsBaked, EFATraffic: settings.RunAsBaked, GDR: settings.RunAsBaked})
		common.Launch = checks.Launch{Known: true, EFA: in.Layout.EFA, Setting: `efa = "all"`, SecurityGroups: in.SecurityGroups}
		start := time.Now()
		err = engine.Verify(ctx, h, discardUI{}, engine.VerifyOptions{Common: common, BOM: doc, SettleTimeout: 5 * time.Minute, CompleteValidation: true})
		verifyTook = time.Since(start)
		if err != nil {
			b.Fatalf("the p5 verification failed: %v", err)
		}
		totals = h.took
		if err := launch.Cleanup(ctx, in, func(string) {}); err != nil {
			b.Fatal(err)
		}
	}
	estimate := verifyTook
	var names []string
	for name := range totals {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		d := totals[name]
		b.ReportMetric(d.Seconds(), "s/"+strings.ReplaceAll(name, " ", "-"))
		line := fmt.Sprintf("%-32s %8s simulated", name, d.Round(10*time.Millisecond))
		if s, ok := sourced[name]; ok {
			estimate += s.real - d
			line += fmt.Sprintf(", %s on AWS (%s)", s.real, s.source)
		} else if note, ok := stageNote[name]; ok {
			line += " (" + note + ")"
		}
		b.Log(line)
	}
	b.ReportMetric(verifyTook.Seconds(), "s/verify")
	b.ReportMetric(estimate.Seconds(), "s/estimate-on-aws")
	b.Logf("the whole verification: %s simulated; on AWS, with the sourced stage durations: %s (goal: under 5m; conservative: DCGM runs alongside the EFA traffic test; the NCCL stages' durations are the simulation's)",
		verifyTook.Round(10*time.Millisecond), estimate.Round(time.Second))
	if estimate > 5*time.Minute {
		b.Errorf("estimated %s on AWS: over the 5-minute goal", estimate.Round(time.Second))
	}
}

// simulatedEC2 starts the fake EC2 whose instances are simulated DLAMI hosts, and gives its
// client and the seeded DLAMI's id.
func simulatedEC2(b *testing.B, root string) (*ec2.Client, string) {
	fleet, err := simfleet.New(simfleet.Options{SimhostDir: filepath.Join(root, "test", "simhost"), StateRoot: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = fleet.Close(context.Background()) })
	srv := awsfake.NewSeeded("us-east-1")
	srv.SetTransitionPolls(0)
	srv.SetMachines(fleet)
	hs := httptest.NewServer(srv)
	b.Cleanup(hs.Close)
	api := ec2.NewFromConfig(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(hs.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKIAFAKEBENCH0000000", "secret", "")})
	return api, awsfake.SeedAMIID("us-east-1", awsfake.SeedName("x86_64", "Base OSS Nvidia Driver GPU AMI", "Ubuntu 24.04", awsfake.SeedBuilds[len(awsfake.SeedBuilds)-1]))
}

// benchCommon is a verification's common options on p5.48xlarge.
func benchCommon() engine.Common {
	return engine.Common{BuildName: "bench", PluginVersion: "bench", InstanceType: "p5.48xlarge",
		CheckTimeout: settings.DefaultCheckTimeout, RemoteFolder: settings.DefaultRemoteFolder}
}

// writeBOM runs the first phase of a two-phase bake on h (the guard and the bill of materials,
// the validation deferred, the provisioner's defaults: DCGM at level 2), which a verification
// then completes, and returns the bill of materials. Its jobs are not counted in h's times.
func writeBOM(ctx context.Context, b *testing.B, h *timedHost, common engine.Common) bom.BOM {
	first := engine.Options{Common: common, ManifestPath: bom.DefaultPath, RunUUID: "bench", DeferValidation: true}
	first.ReportDir = b.TempDir()
	first.Checks = settings.Checks{Function: settings.Function{DCGMLevel: settings.DefaultDCGMLevel}.Resolved()}
	if err := engine.Run(ctx, h, discardUI{}, first); err != nil {
		b.Fatalf("writing the bill of materials: %v", err)
	}
	data, err := h.ReadFile(ctx, bom.DefaultPath)
	if err != nil {
		b.Fatal(err)
	}
	doc, err := bom.Decode(data)
	if err != nil {
		b.Fatal(err)
	}
	h.took = map[string]time.Duration{}
	return doc
}

// canBoot reports whether this machine can boot simulated hosts, and skips the benchmark
// saying why when it cannot.
func canBoot(b *testing.B, root string) bool {
	b.Helper()
	if out, err := exec.Command(filepath.Join(root, "test/e2e/run-scenario"), "--check").CombinedOutput(); err != nil {
		b.Skipf("simulated host unavailable: %s", strings.TrimSpace(string(out)))
		return false
	}
	return true
}

// sshTo connects to the launched instance with its temporary key, over Packer's own SSH
// communicator.
func sshTo(b *testing.B, in *launch.Instance) remote.SSH {
	addr, err := in.Address("private_ip")
	if err != nil {
		b.Fatal(err)
	}
	hostport := net.JoinHostPort(addr, "22")
	comm, err := sshcomm.New(hostport, &sshcomm.Config{
		SSHConfig: &ssh.ClientConfig{User: "ubuntu", Auth: []ssh.AuthMethod{ssh.PublicKeys(in.Signer)},
			HostKeyCallback: ssh.InsecureIgnoreHostKey(), Timeout: 10 * time.Second}, // a throwaway loopback host
		Connection:       func() (net.Conn, error) { return net.DialTimeout("tcp", hostport, 10*time.Second) },
		HandshakeTimeout: 10 * time.Second,
		UseSftp:          true,
	})
	if err != nil {
		b.Fatalf("ssh to %s: %v", hostport, err)
	}
	return remote.SSH{C: comm, TempDir: settings.DefaultRemoteFolder}
}

// discardUI drops what the engine says.
type discardUI struct{}

func (discardUI) Say(string)     {}
func (discardUI) Message(string) {}
func (discardUI) Error(string)   {}
