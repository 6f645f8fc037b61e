package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
)

// startRun runs the command in the background and returns its endpoint
// (read from the first stdout line) and a function that cancels it (as
// SIGTERM does) and returns run's error.
func startRun(t *testing.T, args []string, d deps) (string, *syncBuffer, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, &stdout, &stderr, d) }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if line, _, ok := strings.Cut(stdout.String(), "\n"); ok {
			url, found := strings.CutPrefix(line, "endpoint=")
			if !found || !strings.HasPrefix(url, "http://127.0.0.1:") {
				t.Fatalf("first stdout line %q, want endpoint=http://127.0.0.1:PORT", line)
			}
			stop := func() error {
				cancel()
				select {
				case err := <-done:
					return err
				case <-time.After(30 * time.Second):
					t.Fatal("run did not return 30 s after cancel")
					return nil
				}
			}
			t.Cleanup(func() { cancel() })
			return url, &stderr, stop
		}
		select {
		case err := <-done:
			t.Fatalf("run returned before listening: %v (stderr: %s)", err, stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	t.Fatalf("no endpoint= line in 10 s; stderr: %s", stderr.String())
	return "", nil, nil
}

func ec2Client(url string) *ec2.Client {
	return ec2.New(ec2.Options{Region: "us-east-1", BaseEndpoint: aws.String(url), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("AKIAFAKEFAKEFAKE0001", "secret", "")})
}

// With --simhost, instances boot through the machine backend, and shutting
// down (what SIGTERM does through main's signal context) closes the backend,
// exits cleanly and removes the state root the command created.
func TestSimhostShutdownClosesMachines(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	m := &recordingMachines{}
	url, stderr, stop := startRun(t, []string{"--simhost", "--listen", "127.0.0.1:0", "--regions", "us-east-1", "--quiet"}, testDeps(m))
	ami := awsfake.SeedAMIID("us-east-1", awsfake.SeedName("x86_64", "Base OSS Nvidia Driver GPU AMI", "Ubuntu 24.04", "20261002"))
	out, err := ec2Client(url).RunInstances(context.Background(), &ec2.RunInstancesInput{ImageId: aws.String(ami), InstanceType: "p5.48xlarge",
		MinCount: aws.Int32(1), MaxCount: aws.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(out.Instances[0].InstanceId)
	// The address is the first loopback address free on this host (other
	// fakes' hosts may hold some), the one RunInstances reported.
	want := "Start " + id + " p5.48xlarge " + aws.ToString(out.Instances[0].PublicIpAddress)
	for i := 0; i < 200 && !slices.Contains(m.Calls(), want); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if !slices.Contains(m.Calls(), want) || !strings.HasPrefix(aws.ToString(out.Instances[0].PublicIpAddress), "127.0.") {
		t.Fatalf("machine calls %q, want %q on a 127.0.x.y address", m.Calls(), want)
	}
	if filepath.Base(m.opts.SimhostDir) != "simhost" || !strings.HasPrefix(m.opts.StateRoot, os.Getenv("TMPDIR")) {
		t.Errorf("machine options %+v: want the checkout's test/simhost and a state root under TMPDIR", m.opts)
	}
	if _, err := os.Stat(m.opts.StateRoot); err != nil {
		t.Fatalf("state root while serving: %v", err)
	}
	if err := stop(); err != nil {
		t.Fatalf("run after shutdown: %v (stderr: %s)", err, stderr.String())
	}
	if calls := m.Calls(); calls[len(calls)-1] != "Close" {
		t.Errorf("machine calls %q, want Close last", calls)
	}
	if _, err := os.Stat(m.opts.StateRoot); !os.IsNotExist(err) {
		t.Errorf("state root %s left after a clean shutdown: %v", m.opts.StateRoot, err)
	}
	if !strings.Contains(stderr.String(), "stopped: every instance terminated") {
		t.Errorf("stderr: %s", stderr.String())
	}
}

func TestSimhostRefusals(t *testing.T) {
	notRoot := testDeps(&recordingMachines{})
	notRoot.geteuid = func() int { return 1000 }
	tests := []struct {
		name string
		args []string
		d    deps
		want string
	}{
		{"not root", []string{"--simhost"}, notRoot, "needs root"},
		{"backend fails", []string{"--simhost", "--state-root", t.TempDir()}, testDeps(nil), "no machine backend"},
		{"state root without simhost", []string{"--state-root", "/tmp/x"}, testDeps(nil), "only make sense with --simhost"},
		{"bad listen", []string{"--listen", "256.0.0.1:0"}, testDeps(nil), "--listen"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut syncBuffer
			err := run(context.Background(), tc.args, &out, &errOut, tc.d)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("run(%q) = %v, want an error mentioning %q", tc.args, err, tc.want)
			}
			if strings.Contains(out.String(), "endpoint=") {
				t.Errorf("printed an endpoint before failing: %q", out.String())
			}
		})
	}
}

func TestListenAndAddrAlias(t *testing.T) {
	for _, flagName := range []string{"--listen", "-addr"} {
		t.Run(flagName, func(t *testing.T) {
			url, _, stop := startRun(t, []string{flagName, "127.0.0.1:0", "--regions", "us-east-1", "--quiet"}, testDeps(nil))
			if _, err := ec2Client(url).DescribeRegions(context.Background(), &ec2.DescribeRegionsInput{}); err != nil {
				t.Errorf("DescribeRegions at %s: %v", url, err)
			}
			if err := stop(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// The real binary: a SIGTERM ends it with exit status 0 after it says so.
func TestSIGTERMExitsZero(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command; skipped with -short")
	}
	bin := filepath.Join(t.TempDir(), "dlami-fake-aws")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "--listen", "127.0.0.1:0", "--regions", "us-east-1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "endpoint=")
	if err != nil || !ok {
		t.Fatalf("first line %q: %v", line, err)
	}
	if _, err := ec2Client(url).DescribeRegions(context.Background(), &ec2.DescribeRegionsInput{}); err != nil {
		t.Fatalf("serving: %v", err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v (stderr: %s)", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "stopped: every instance terminated") {
		t.Errorf("stderr: %s", stderr.String())
	}
}
