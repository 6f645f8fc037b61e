// Package bench measures the plugin's remote work over real SSH against the simulated DLAMI
// host: the kernel guard's drift check and the whole host validation suite (NCCL aside). Run
// with `make bench` (as root: the host needs overlayfs and chroot).
package bench

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sshcomm "github.com/hashicorp/packer-plugin-sdk/sdk-internals/communicator/ssh"
	"golang.org/x/crypto/ssh"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/guard"
	"github.com/dlami-bake/packer-plugin-dlami/internal/probe"
	"github.com/dlami-bake/packer-plugin-dlami/internal/remote"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

func repoRoot(tb testing.TB) string {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		tb.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// bootHost starts a simulated host and returns a Host connected to it over SSH.
func bootHost(tb testing.TB) remote.SSH {
	if st := os.Getenv("DLAMI_BENCH_STATE"); st != "" {
		return dial(tb, st)
	}
	tb.Helper()
	root := repoRoot(tb)
	run := filepath.Join(root, "test/e2e/run-scenario")
	if out, err := exec.Command(run, "--check").CombinedOutput(); err != nil {
		tb.Skipf("simulated host unavailable: %s", strings.TrimSpace(string(out)))
	}
	state := tb.TempDir()
	if out, err := exec.Command(filepath.Join(root, "test/simhost/boot"), state).CombinedOutput(); err != nil {
		tb.Fatalf("boot: %v\n%s", err, out)
	}
	tb.Cleanup(func() { _ = exec.Command(filepath.Join(root, "test/simhost/teardown"), state).Run() })
	return dial(tb, state)
}

// dial connects to a booted simulated host through Packer's own SSH communicator.
func dial(tb testing.TB, state string) remote.SSH {
	env := readEnv(tb, filepath.Join(state, "env"))
	key, err := os.ReadFile(env["ssh_private_key_file"])
	if err != nil {
		tb.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	addr := net.JoinHostPort(env["ssh_host"], env["ssh_port"])
	comm, err := sshcomm.New(addr, &sshcomm.Config{
		SSHConfig: &ssh.ClientConfig{
			User:            "ubuntu",
			Auth:            []ssh.AuthMethod{ssh.PublicKeys(signer)},
			HostKeyCallback: ssh.InsecureIgnoreHostKey(), // a throwaway loopback host
			Timeout:         10 * time.Second,
		},
		Connection:       func() (net.Conn, error) { return net.DialTimeout("tcp", addr, 10*time.Second) },
		HandshakeTimeout: 10 * time.Second,
		UseSftp:          true,
	})
	if err != nil {
		tb.Fatalf("ssh to the simulated host: %v", err)
	}
	return remote.SSH{C: comm, TempDir: settings.DefaultRemoteFolder}
}

func readEnv(tb testing.TB, path string) map[string]string {
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			env[k] = v
		}
	}
	return env
}

func runBatch(tb testing.TB, h remote.SSH, cmds []bundle.Command) map[string]bundle.Section {
	sections, err := h.Query(context.Background(), cmds)
	if err != nil {
		tb.Fatalf("query: %v", err)
	}
	return sections
}

// BenchmarkGuardDriftCheck is one drift check as the provisioner runs it after every layer:
// one SSH round trip for the snapshot, parse, diff against the baseline, judge.
func BenchmarkGuardDriftCheck(b *testing.B) {
	h := bootHost(b)
	base, err := probe.Snapshot(context.Background(), h)
	if err != nil {
		b.Fatal(err)
	}
	guarded := guard.Guarded(base, settings.GuardPolicy{})
	b.ResetTimer()
	for b.Loop() {
		cur, err := probe.Snapshot(context.Background(), h)
		if err != nil {
			b.Fatal(err)
		}
		if cs := guard.Judge(base, cur, guarded, "bench", guard.Options{}); result.Failed(cs) {
			b.Fatalf("the unchanged host drifted: %+v", cs)
		}
	}
}

// BenchmarkHostSuite is the whole host validation (NCCL aside): one SSH round trip for every
// command, then judging against the instance profile. Goal: at most 1 s per run.
func BenchmarkHostSuite(b *testing.B) {
	h := bootHost(b)
	o := probe.Options{NVMePath: "/opt/dlami/nvme", CheckTimeout: 30 * time.Second}
	b.ResetTimer()
	for b.Loop() {
		f, err := probe.Host(context.Background(), h, o)
		if err != nil {
			b.Fatal(err)
		}
		if cs := checks.JudgePhase(checks.PhaseHost, facts.Run{Host: f}, checks.Resolve(f, settings.Checks{}, "")); result.Failed(cs) {
			b.Fatalf("the healthy simulated host failed validation: %+v", cs)
		}
	}
}
