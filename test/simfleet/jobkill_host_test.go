package simfleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	sshcomm "github.com/hashicorp/packer-plugin-sdk/sdk-internals/communicator/ssh"
	"golang.org/x/crypto/ssh"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/host"
	"github.com/dlami-bake/packer-plugin-dlami/internal/remote"
	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
)

// TestJobKillOverSSH: the SSH host's job script, over real sshd on a simulated instance, as the
// login user and through sudo: Kill stops a timeout(1) child and every process under it, which
// left the job's process group, while Run still waits for the job; Run then returns. (The same
// table runs against both host implementations without sshd in internal/remote's
// TestKillStopsTheWholeJob.)
func TestJobKillOverSSH(t *testing.T) {
	f := hostFleet(t)
	ctx := context.Background()
	key := newKeyPair(t)
	if err := f.Start(ctx, awsfake.MachineSpec{InstanceID: "i-0bbbbbbbbbbbbbb01", InstanceType: "p5.48xlarge", Address: addrA, AuthorizedKey: key.line}); err != nil {
		t.Fatal(err)
	}
	hostport := net.JoinHostPort(addrA, "22")
	comm, err := sshcomm.New(hostport, &sshcomm.Config{
		SSHConfig: &ssh.ClientConfig{
			User: "ubuntu", Auth: []ssh.AuthMethod{ssh.PublicKeys(key.signer)},
			HostKeyCallback: ssh.InsecureIgnoreHostKey(), // a fresh simulated host: nothing to pin
			Timeout:         10 * time.Second,
		},
		Connection:       func() (net.Conn, error) { return net.DialTimeout("tcp", hostport, 10*time.Second) },
		HandshakeTimeout: 10 * time.Second,
		UseSftp:          true,
	})
	if err != nil {
		t.Fatal(err)
	}
	s := remote.SSH{C: comm, TempDir: "/tmp"}
	for _, asRoot := range []bool{false, true} {
		t.Run(fmt.Sprintf("as root %v", asRoot), func(t *testing.T) {
			dir, err := s.MakeTempDir(ctx, "/tmp", "dlami-killtest")
			if err != nil {
				t.Fatal(err)
			}
			body := "D=" + bundle.Quote(dir) + "; export D\necho started\n" +
				`timeout 60 sh -c 'echo $$ >"$D/inner"; sleep 300 & echo $! >"$D/bg"; sleep 300' & echo $! >"$D/timeout"; wait` + "\n"
			if err := s.Upload(ctx, dir+"/job.sh", strings.NewReader(body)); err != nil {
				t.Fatal(err)
			}
			j := host.Job{Name: "the kill test", Script: dir + "/job.sh", AsRoot: asRoot, PIDFile: dir + "/job.pid", Output: io.Discard}
			done := make(chan error, 1)
			go func() { _, err := s.Run(ctx, j); done <- err }()
			procs := map[string]int{}
			for _, name := range []string{"timeout", "inner", "bg"} {
				for deadline := time.Now().Add(20 * time.Second); procs[name] == 0; time.Sleep(200 * time.Millisecond) {
					if b, err := s.ReadFile(ctx, dir+"/"+name); err == nil {
						procs[name], _ = strconv.Atoi(strings.TrimSpace(string(b)))
					}
					if time.Now().After(deadline) {
						t.Fatalf("the job did not record %s", name)
					}
				}
			}
			states := func() map[string]string {
				t.Helper()
				var cmds []bundle.Command
				for name, pid := range procs {
					cmds = append(cmds, bundle.Command{Name: name, Timeout: 10 * time.Second,
						Shell: fmt.Sprintf(`st=$(cat /proc/%d/stat 2>/dev/null) || { echo gone; exit 0; }; set -- ${st##*) }; echo "$1"`, pid)})
				}
				sections, err := s.Query(ctx, cmds)
				if err != nil {
					t.Fatal(err)
				}
				out := map[string]string{}
				for name := range procs {
					out[name] = sections[name].Output
				}
				return out
			}
			for name, st := range states() {
				if st == "gone" || st == "Z" {
					t.Fatalf("%s (pid %d) is %s before Kill", name, procs[name], st)
				}
			}
			kctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if err := s.Kill(kctx, j); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if err != nil && !errors.Is(err, remote.ErrDisconnected) {
					t.Logf("Run after Kill: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("Run still waits for the job 20 s after Kill")
			}
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
				var left []string
				for name, st := range states() {
					if st != "gone" && st != "Z" {
						left = append(left, fmt.Sprintf("%s (pid %d, state %s)", name, procs[name], st))
					}
				}
				if len(left) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("outlived Kill over SSH: %v", left)
				}
			}
			if err := s.Kill(kctx, j); err != nil {
				t.Errorf("killing a job that ended: %v", err)
			}
			_ = s.RemoveAll(ctx, dir)
		})
	}
}
