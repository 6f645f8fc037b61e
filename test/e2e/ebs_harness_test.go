package e2e

// Harness of the amazon-ebs scenarios (ebs_test.go, rebake_loop_test.go): the real Packer and
// the real amazon plugin against test/cmd/dlami-fake-aws --simhost, whose EC2 instances are
// simulated DLAMI hosts (test/simfleet) on 127.0.0.N:22.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
	"github.com/dlami-bake/packer-plugin-dlami/test/simfleet"
)

const (
	// Fake static credentials, as a CI job's configure-aws-credentials step exports real ones.
	fakeAccessKeyID     = "AKIAFAKEEBSE2E000000"
	fakeSecretAccessKey = "fake-secret-for-the-local-e2e-endpoint"
	ebsRegion           = "us-east-1"
	ebsCopyRegion       = "us-west-2"
)

// ebsEnv is what every amazon-ebs scenario needs, checked once per test.
type ebsEnv struct {
	repo      string
	packer    string
	pluginDir string
	fakeBin   string
}

// ebsPrereqs checks the preconditions (root, tools, mirror, Packer) through run-scenario
// --prepare, which also installs both plugins and builds the simulated rootfs, then builds
// the fake. Missing prerequisites skip, or fail with CI=true.
func ebsPrereqs(t *testing.T) ebsEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("amazon-ebs scenarios boot simulated instances and run Packer; skipped with -short")
	}
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	runner := filepath.Join(repo, "test", "e2e", "run-scenario")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute) // a cold rootfs takes ~4 min
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, runner, "--prepare")
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == preconditionExit {
			missing(t, strings.TrimSpace(stderr.String()))
		}
		t.Fatalf("run-scenario --prepare: %v\n%s", err, stderr.String())
	}
	if taken := wildcardListenersOn22(t); taken != "" {
		missing(t, fmt.Sprintf("something listens on all addresses on port 22 (%s), so no simulated instance can listen on 127.0.0.N:22: make this machine's sshd listen on a specific address (ListenAddress)", taken))
	}
	e := ebsEnv{repo: repo, packer: filepath.Join(repo, "bin", "packer"), pluginDir: filepath.Join(repo, ".packer-plugins")}
	if p := os.Getenv("PACKER"); p != "" {
		e.packer = p
	}
	if p := os.Getenv("PACKER_PLUGIN_PATH"); p != "" {
		e.pluginDir = p
	}
	e.fakeBin = filepath.Join(t.TempDir(), "dlami-fake-aws")
	build := exec.Command("go", "build", "-o", e.fakeBin, "./test/cmd/dlami-fake-aws")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./test/cmd/dlami-fake-aws: %v\n%s", err, out)
	}
	return e
}

func wildcardListenersOn22(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("ss", "-Htln", "sport = :22").Output()
	if err != nil {
		t.Fatalf("ss -Htln: %v", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 4 {
			for _, w := range []string{"0.0.0.0:", "*:", "[::]:"} {
				if strings.HasPrefix(f[3], w) {
					return f[3]
				}
			}
		}
	}
	return ""
}

// outDir is where a scenario keeps its files: DLAMI_E2E_OUT/<name> when set (kept), else a
// temp dir.
func outDir(t *testing.T, name string) string {
	t.Helper()
	keep := os.Getenv("DLAMI_E2E_OUT")
	if keep == "" {
		return t.TempDir()
	}
	dir := filepath.Join(keep, name)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// fakeAWS is one running test/cmd/dlami-fake-aws --simhost.
type fakeAWS struct {
	endpoint  string
	stateRoot string // the fleet's disks and layers
	dir       string // everything of this fake: state root, log
	logPath   string
	cmd       *exec.Cmd
	exited    chan struct{}
	waitErr   error
	stopped   bool
}

// startFake starts the fake and returns once it serves. With simhost, its instances are
// simulated DLAMI hosts; without, they exist only as EC2 state (enough for communicator none)
// and use no loopback address, so such a fake can run beside one with hosts.
func (e ebsEnv) startFake(t *testing.T, name string, simhost bool) *fakeAWS {
	t.Helper()
	f := &fakeAWS{dir: outDir(t, name), exited: make(chan struct{})}
	f.logPath = filepath.Join(f.dir, "fake-aws.log")
	logFile, err := os.Create(f.logPath)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--listen", "127.0.0.1:0", "--regions", ebsRegion + "," + ebsCopyRegion,
		// Describe shows a resource's real state (pending while a host boots or a disk is
		// captured) but no extra pending polls: the amazon plugin's image waiter ignores
		// AWS_POLL_DELAY_SECONDS and sleeps 15 s or more between polls.
		"--transition-polls", "0",
		// A GPU type EC2 sells that the plugin has no profile for (unprofiled-type).
		"--new-instance-type", "p7-future.48xlarge=p6-b200.48xlarge"}
	if simhost {
		f.stateRoot = filepath.Join(f.dir, "fleet")
		args = append(args, "--simhost", "--simhost-dir", filepath.Join(e.repo, "test", "simhost"), "--state-root", f.stateRoot)
	}
	f.cmd = exec.Command(e.fakeBin, args...)
	f.cmd.Stderr = logFile
	f.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := f.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		f.waitErr = f.cmd.Wait()
		logFile.Close()
		close(f.exited)
	}()
	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			first <- sc.Text()
		}
		close(first)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case line := <-first:
		ep, ok := strings.CutPrefix(line, "endpoint=")
		if !ok {
			t.Fatalf("dlami-fake-aws's first line is %q, want endpoint=URL (log %s)", line, f.logPath)
		}
		f.endpoint = ep
	case <-time.After(30 * time.Second):
		t.Fatalf("dlami-fake-aws printed no endpoint in 30 s (log %s)", f.logPath)
	}
	t.Cleanup(func() {
		if !f.stopped {
			f.stop(t)
		}
	})
	return f
}

// stop is the SIGTERM path: the fake must terminate every instance and exit 0, and nothing
// of its hosts may stay mounted or running.
func (f *fakeAWS) stop(t *testing.T) {
	t.Helper()
	f.stopped = true
	_ = f.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-f.exited:
	case <-time.After(3 * time.Minute):
		_ = syscall.Kill(-f.cmd.Process.Pid, syscall.SIGKILL)
		<-f.exited
		t.Errorf("dlami-fake-aws did not exit within 3 min of SIGTERM (log %s)", f.logPath)
	}
	if f.waitErr != nil {
		t.Errorf("dlami-fake-aws after SIGTERM: %v (want exit 0); log tail:\n%s", f.waitErr, tail(f.logPath, 20))
	}
	if f.stateRoot == "" {
		return
	}
	assertNothingLeft(t, f.dir)
	if _, err := os.Stat(f.stateRoot); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the fleet's state root %s is still there after SIGTERM (%v)", f.stateRoot, err)
	}
}

// assertNothingLeft fails when anything under dir is mounted or running, read from
// /proc/self/mountinfo and the process table.
func assertNothingLeft(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	mounts, err := simfleet.ParseMountinfo(string(b))
	if err != nil {
		t.Fatal(err)
	}
	if left := simfleet.MountsUnder(mounts, dir); len(left) > 0 {
		t.Errorf("still mounted under %s: %q", dir, left)
	}
	simhost, err := filepath.Abs(filepath.Join("..", "simhost"))
	if err != nil {
		t.Fatal(err)
	}
	procs, err := simfleet.ProcessesUsing("/proc", dir, simhost)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		t.Errorf("still running under %s: %s", dir, p)
	}
}

// state is GET /_fake/state.
func (f *fakeAWS) state(t *testing.T) awsfake.StateDump {
	t.Helper()
	var s awsfake.StateDump
	if err := json.Unmarshal(f.control(t, http.MethodGet, "/_fake/state"), &s); err != nil {
		t.Fatalf("GET /_fake/state: %v", err)
	}
	return s
}

// control calls the fake's control API and returns the body of a 2xx answer.
func (f *fakeAWS) control(t *testing.T, method, path string) []byte {
	t.Helper()
	req, err := http.NewRequest(method, f.endpoint+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %s: %s", method, path, resp.Status, b)
	}
	return b
}

// calls counts the fake's log lines for one region and action, e.g. RunInstances answers.
func (f *fakeAWS) calls(t *testing.T, region, op string) (ok, failed int) {
	t.Helper()
	b, err := os.ReadFile(f.logPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		i := strings.Index(line, " "+region+" "+op+" -> ")
		if i < 0 {
			continue
		}
		if strings.HasSuffix(line, "-> 200") {
			ok++
		} else {
			failed++
		}
	}
	return ok, failed
}

// ownImages returns the images the fake's account owns in a region.
func ownImages(s awsfake.StateDump, region string) []awsfake.Image {
	var out []awsfake.Image
	for _, img := range s.Regions[region].Images {
		if img.OwnerID == s.Account {
			out = append(out, img)
		}
	}
	return out
}

// assertCleanedUp checks what amazon-ebs and the post-processor must leave behind in a region
// after any build, pass or fail: no instance that is not terminated, no temporary key pair or
// security group (groups a test made itself are named team-*), no network interface, no
// Elastic IP, no placement group.
func assertCleanedUp(t *testing.T, s awsfake.StateDump, region string) {
	t.Helper()
	rs := s.Regions[region]
	for _, in := range rs.Instances {
		if in.State != "terminated" {
			t.Errorf("%s: instance %s is %s, want terminated", region, in.ID, in.State)
		}
	}
	for _, kp := range rs.KeyPairs {
		t.Errorf("%s: key pair %s (%s) left behind", region, kp.Name, kp.ID)
	}
	for _, g := range rs.SecurityGroups {
		if g.Name != "default" && !strings.HasPrefix(g.Name, "team-") {
			t.Errorf("%s: security group %s (%s) left behind", region, g.Name, g.ID)
		}
	}
	for _, ni := range rs.NetworkInterfaces {
		t.Errorf("%s: network interface %s (%s, %s, of %s) left behind", region, ni.ID, ni.InterfaceType, ni.Status, ni.InstanceID)
	}
	for _, a := range rs.ElasticIPs {
		t.Errorf("%s: Elastic IP %s (%s) left behind", region, a.PublicIP, a.AllocationID)
	}
	for _, pg := range rs.PlacementGroups {
		t.Errorf("%s: placement group %s left behind", region, pg.Name)
	}
}

// packerResult is one `packer build`.
type packerResult struct {
	code   int
	ui     string // Packer's UI output
	log    string // PACKER_LOG
	out    string // the output directory
	took   time.Duration
	killed bool
}

func (r packerResult) all() string { return r.ui + "\n" + r.log }

// packerEnv is the environment of every Packer run: plugins, fake credentials, and waiters
// that poll every second (AWS_POLL_DELAY_SECONDS, the amazon plugin's documented variable:
// a simulated instance boots in about a second, a real one in minutes).
func (e ebsEnv) packerEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "AWS_") || strings.HasPrefix(k, "PKR_VAR_") || strings.HasPrefix(k, "PACKER_") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env,
		"PACKER_PLUGIN_PATH="+e.pluginDir, "PACKER_CHECKPOINT_DISABLE=1",
		"AWS_ACCESS_KEY_ID="+fakeAccessKeyID, "AWS_SECRET_ACCESS_KEY="+fakeSecretAccessKey,
		"AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE="+os.DevNull, "AWS_SHARED_CREDENTIALS_FILE="+os.DevNull,
		"AWS_POLL_DELAY_SECONDS=1", "AWS_TIMEOUT_SECONDS=900",
	)
	return append(env, extra...)
}

// packerEnv is ebsEnv.packerEnv pointed at this fake. AWS_ENDPOINT_URL_EC2 is there because
// the amazon plugin v1.8.0 builds the client of the ami_regions copy without
// custom_endpoint_ec2 (common/step_ami_region_copy.go, GetRegionConn): only the SDK's own
// endpoint setting reaches it. Templates still set custom_endpoint_ec2, as users do.
// AWS_ENDPOINT_URL_PRICING points the post-processor's price_lookup at the fake's Price List
// API: the plugin has no setting for that endpoint, as the amazon plugin has none.
func (f *fakeAWS) packerEnv(e ebsEnv, extra ...string) []string {
	return e.packerEnv(append([]string{"AWS_ENDPOINT_URL_EC2=" + f.endpoint, "AWS_ENDPOINT_URL_PRICING=" + f.endpoint}, extra...)...)
}

// build runs `packer build -color=false ARGS` in dir with PACKER_LOG into out/packer.log.
// onStart, when set, gets the running command (to kill it mid-bake).
func (e ebsEnv) build(t *testing.T, dir, out string, env []string, onStart func(*exec.Cmd), args ...string) packerResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	logPath := filepath.Join(out, "packer.log")
	cmd := exec.CommandContext(ctx, e.packer, append([]string{"build", "-color=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(env, "PACKER_LOG=1", "PACKER_LOG_PATH="+logPath)
	var ui bytes.Buffer
	cmd.Stdout, cmd.Stderr = &ui, &ui
	// Packer and its plugins in their own group: a kill reaches all of them, never the test.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Minute
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if onStart != nil {
		onStart(cmd)
	}
	err := cmd.Wait()
	r := packerResult{ui: ui.String(), out: out, took: time.Since(start)}
	_ = os.WriteFile(filepath.Join(out, "packer.out"), ui.Bytes(), 0o644)
	defer func() { _ = os.WriteFile(filepath.Join(out, "exit-code"), []byte(fmt.Sprintln(r.code)), 0o644) }()
	b, _ := os.ReadFile(logPath)
	r.log = string(b)
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.killed = true
		}
	default:
		t.Fatalf("packer build: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("packer build did not finish within 20 min (output in %s)", out)
	}
	return r
}

// seedDLAMI is the id of the seeded Base OSS DLAMI of a build in a region.
func seedDLAMI(region, build string) string {
	return awsfake.SeedAMIID(region, awsfake.SeedName("x86_64", "Base OSS Nvidia Driver GPU AMI", "Ubuntu 24.04", build))
}

// latestSeedBuild is the DLAMI build the fake's SSM parameter points at before any publish.
func latestSeedBuild() string { return awsfake.SeedBuilds[len(awsfake.SeedBuilds)-1] }

// readLayerFile reads a file of an AMI from its topmost layer that has it: what an instance
// launched from the AMI would see there (no whiteout handling: callers read files a bake wrote).
func readLayerFile(t *testing.T, img awsfake.Image, path string) []byte {
	t.Helper()
	for i := len(img.Layers) - 1; i >= 0; i-- {
		b, err := os.ReadFile(filepath.Join(img.Layers[i], path))
		if err == nil {
			return b
		}
	}
	t.Fatalf("no layer of %s (%d layers) holds %s", img.ID, len(img.Layers), path)
	return nil
}
