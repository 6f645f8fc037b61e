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
	t.Run("the SSH connection drops", func(t *testing.T) { jobStopsWhenItsConnectionDrops(t, s, key) })
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
			if left := stillRunning(t, s, procs); len(left) != len(procs) {
				t.Fatalf("before Kill only %v run", left)
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
				left := stillRunning(t, s, procs)
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

// jobStopsWhenItsConnectionDrops: a job started over an SSH connection that then goes away
// (Packer killed, the network gone) is stopped on the host by the job script's watchdog, a
// timeout(1) child and its children included, without anyone calling Kill.
func jobStopsWhenItsConnectionDrops(t *testing.T, s remote.SSH, key keyPair) {
	ctx := context.Background()
	dir, err := s.MakeTempDir(ctx, "/tmp", "dlami-droptest")
	if err != nil {
		t.Fatal(err)
	}
	body := "D=" + bundle.Quote(dir) + "; export D\n" +
		`timeout 60 sh -c 'echo $$ >"$D/inner"; sleep 300 & echo $! >"$D/bg"; sleep 300' & echo $! >"$D/timeout"; wait` + "\n"
	if err := s.Upload(ctx, dir+"/job.sh", strings.NewReader(body)); err != nil {
		t.Fatal(err)
	}
	// The command line the SSH host runs (remote.SSH.Run), over a connection of its own.
	cmd := "/bin/sh -c " + bundle.Quote(host.JobScript)
	for _, a := range host.JobRunArgs(host.Job{Script: dir + "/job.sh", PIDFile: dir + "/job.pid"}, 0) {
		cmd += " " + bundle.Quote(a)
	}
	client, err := ssh.Dial("tcp", net.JoinHostPort(addrA, "22"), &ssh.ClientConfig{
		User: "ubuntu", Auth: []ssh.AuthMethod{ssh.PublicKeys(key.signer)},
		HostKeyCallback: ssh.InsecureIgnoreHostKey(), Timeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := client.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.Start(cmd); err != nil {
		t.Fatal(err)
	}
	pids := map[string]int{}
	for _, name := range []string{"timeout", "inner", "bg"} {
		for deadline := time.Now().Add(20 * time.Second); pids[name] == 0; time.Sleep(200 * time.Millisecond) {
			if b, err := s.ReadFile(ctx, dir+"/"+name); err == nil {
				pids[name], _ = strconv.Atoi(strings.TrimSpace(string(b)))
			}
			if time.Now().After(deadline) {
				t.Fatalf("the job did not record %s", name)
			}
		}
	}
	time.Sleep(2 * time.Second) // the watchdog has read the session id
	if left := stillRunning(t, s, pids); len(left) != len(pids) {
		t.Fatalf("before the drop only %v run", left)
	}
	client.Close() // the connection goes, as when Packer is killed
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		left := stillRunning(t, s, pids)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("20 s after the connection dropped, still running: %v", left)
		}
	}
	_ = s.RemoveAll(ctx, dir)
}

// stillRunning names the processes of pids that still run on the host (neither gone nor zombies).
func stillRunning(t *testing.T, s remote.SSH, pids map[string]int) []string {
	t.Helper()
	var cmds []bundle.Command
	for name, pid := range pids {
		cmds = append(cmds, bundle.Command{Name: name, Timeout: 10 * time.Second,
			Shell: fmt.Sprintf(`st=$(cat /proc/%d/stat 2>/dev/null) || { echo gone; exit 0; }; set -- ${st##*) }; echo "$1"`, pid)})
	}
	sections, err := s.Query(context.Background(), cmds)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for name, pid := range pids {
		if st := sections[name].Output; st != "gone" && st != "Z" {
			left = append(left, fmt.Sprintf("%s (pid %d, state %s)", name, pid, st))
		}
	}
	return left
}
