package e2e

// The node check at boot (issue 19), end to end: a golden Slurm image baked with node_check
// through the real amazon-ebs builder and the fake EC2, verified by the dlami post-processor
// (which runs the image's node check on its instance), then simulated instances booted from the
// AMI's layers: the boot supervisor runs the enabled oneshot unit before slurmd, and slurmd
// starts only when the unit it Requires= succeeded (test/simhost/root/usr/lib/dlami-sim/
// systemd-boot). Faults at boot are knobs (a GPU missing) or one more read-only layer over the
// AMI's, as an instance's own disk changes would be (a hung tool, a stand-in scontrol, an
// administrator's drain setting).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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

func nodeCheckScenarios(t *testing.T, e ebsEnv, fake *fakeAWS, ebsDir string) {
	out := outDir(t, "ebs-node-check")
	r := e.build(t, ebsDir, out, fake.packerEnv(e), nil,
		"-var", "aws_endpoint="+fake.endpoint, "-var", "report_dir="+out, "nodecheck.pkr.hcl")
	t.Logf("golden bake with node_check (amazon-ebs, verification): %s", r.took.Round(time.Second))
	if r.code != 0 {
		t.Fatalf("packer build exited %d (output in %s):\n%s", r.code, out, tail(filepath.Join(out, "packer.out"), 60))
	}
	if !strings.Contains(r.ui, "dlami: installed /usr/local/sbin/dlami-node-check (linux/amd64, dlami-node-check ") {
		t.Errorf("the bake did not say it installed the node check:\n%s", grepLines(r.ui, "node"))
	}
	verify := readReport(t, filepath.Join(out, "verify", ebsRegion))
	if verify.Result != "pass" || checkStatus(verify, "node-check") != "pass" {
		t.Errorf("verification: %s, node-check %s, failed %v", verify.Result, checkStatus(verify, "node-check"), verify.FailedChecks)
	}
	var img *awsfake.Image
	for _, i := range ownImages(fake.state(t), ebsRegion) {
		if strings.HasPrefix(i.Name, "nodecheck-slurm-") {
			img = &i
		}
	}
	if img == nil {
		t.Fatal("no nodecheck-slurm-* AMI")
	}
	unit := string(readLayerFile(t, *img, "etc/systemd/system/dlami-node-check.service"))
	if !strings.Contains(unit, "RequiredBy=slurmd.service") || !strings.Contains(unit, "Before=slurmd.service") {
		t.Errorf("unit in the image:\n%s", unit)
	}
	base := filepath.Join(fake.stateRoot, "base")
	if _, err := os.Stat(filepath.Join(base, "etc")); err != nil {
		t.Fatalf("the fleet's base rootfs %s: %v", base, err)
	}
	boot := func(t *testing.T, name string, knobs string, extra map[string]string) *simNode {
		return bootNode(t, e, base, img.Layers, name, p6B200Launch, knobs, extra)
	}

	t.Run("healthy", func(t *testing.T) {
		n := boot(t, "healthy", "", nil)
		j := n.journal(t)
		pass, started := strings.Index(j, "dlami-node-check.service: dlami-node-check: PASS"), strings.Index(j, "systemd: Started slurmd.service.")
		if pass < 0 || started < 0 || started < pass {
			t.Fatalf("journal: want the PASS verdict, then slurmd started:\n%s", j)
		}
		if st := n.unitState(t, "slurmd.service"); st != "active" {
			t.Errorf("slurmd is %s after a healthy boot", st)
		}
		prom := n.file(t, "var/lib/prometheus/node-exporter/dlami_node_check.prom")
		for _, want := range []string{`dlami_node_check{check="gpu",status="pass"} 1`, `dlami_node_check{check="first-boot-packages",status="pass"} 1`, `dlami_node_check_info{build="nodecheck"`} {
			if !strings.Contains(prom, want) {
				t.Errorf("textfile lacks %q:\n%s", want, prom)
			}
		}
		// memlock judges the new logins of the bake's SSH user, which the provisioner wrote into
		// the node check's config (the check itself runs as root).
		if rep := n.report(t); rep.Result != "pass" || checkStatus(rep, "job-memlock") != "pass" || checkStatus(rep, "memlock") != "pass" {
			t.Errorf("report at boot: %s, job-memlock %s, memlock %s, failed %v", rep.Result, checkStatus(rep, "job-memlock"), checkStatus(rep, "memlock"), rep.FailedChecks)
		}
	})

	t.Run("gpu-missing-block", func(t *testing.T) {
		n := boot(t, "gpu7-block", "gpu-count=7", nil)
		j := n.journal(t)
		if !strings.Contains(j, "dlami-node-check.service: dlami-node-check: FAIL gpu") {
			t.Errorf("journal lacks the FAIL gpu verdict:\n%s", j)
		}
		if !strings.Contains(j, "Dependency failed for slurmd.service") || strings.Contains(j, "Started slurmd.service") {
			t.Errorf("slurmd was not kept from starting:\n%s", j)
		}
		if st := n.unitState(t, "slurmd.service"); st == "active" {
			t.Error("slurmd is active on a node that failed its check")
		}
		if rep := n.report(t); checkStatus(rep, "gpu") != "fail" {
			t.Errorf("report: gpu %s", checkStatus(rep, "gpu"))
		}
	})

	// A fleet node whose launch template attached no EFA interface (issue 25): the node check
	// fails efa-devices naming the template, and slurmd does not start; it never passes a p6
	// node whose multi-node jobs would fall back to sockets.
	t.Run("no-efa-block", func(t *testing.T) {
		n := boot(t, "no-efa", "efa-cards=none", nil)
		j := n.journal(t)
		if !strings.Contains(j, "dlami-node-check.service: dlami-node-check: FAIL efa-devices") || strings.Contains(j, "Started slurmd.service") {
			t.Errorf("journal: want FAIL efa-devices and slurmd kept from starting:\n%s", j)
		}
		rep := n.report(t)
		if st, msg := checkStatus(rep, "efa-devices"), checkMessage(rep, "efa-devices"); st != "fail" || !strings.Contains(msg, "launch template") {
			t.Errorf("report: efa-devices %s %q: want a failure naming the launch template", st, msg)
		}
	})

	t.Run("gpu-missing-drain", func(t *testing.T) {
		// The same image set to drain (what an administrator changes on a fleet: the config
		// and the unit's RequiredBy link), with a stand-in scontrol that records its calls.
		n := boot(t, "gpu7-drain", "gpu-count=7", map[string]string{
			"etc/dlami-node-check/config.json": `{"action": "drain", "bom_path": "/etc/dlami-bake/manifest.json", "out_dir": "/var/lib/dlami-node-check", "timeout": "2m", "check_timeout": "1m", "scontrol": "/usr/bin/scontrol", "before": ["slurmd.service"]}`,
			// It answers the node check's read (scontrol -o show node NAME) as Slurm 22.05 does
			// for an idle node: the check reads the node before it drains it.
			"usr/bin/scontrol": "#!/bin/sh\nprintf '%s\\n' \"$*\" >>/var/log/scontrol.calls\n" +
				"case \"$*\" in '-o show node '*) echo \"NodeName=$4 Arch=x86_64 CoresPerSocket=48 State=IDLE ThreadsPerCore=2\" ;; esac\n",
			"etc/systemd/system/slurmd.service.requires/dlami-node-check.service": whiteout,
		})
		// Slurm's node name is the host's, which EC2 derives from the instance's address.
		calls := n.file(t, "var/log/scontrol.calls")
		if want := "update nodename=" + simfleet.EC2HostName(n.env["ssh_host"]) + " state=drain reason=dlami: gpu"; !strings.Contains(calls, want) {
			t.Errorf("scontrol calls, want %q:\n%s", want, calls)
		}
		if st := n.unitState(t, "slurmd.service"); st != "active" {
			t.Errorf("slurmd is %s: with drain it starts, drained", st)
		}
		// The administrator's config names no login user: memlock is not judged, and says so.
		if st := checkStatus(n.report(t), "memlock"); st != "warn" {
			t.Errorf("memlock %s without a login user, want warn", st)
		}
	})

	t.Run("apt-upgrade-drift", func(t *testing.T) {
		n := boot(t, "drift", "", nil)
		if out, err := n.ssh(t, "sudo -n env DEBIAN_FRONTEND=noninteractive apt-get -y -q upgrade"); err != nil {
			t.Fatalf("apt-get -y upgrade: %v\n%s", err, out)
		}
		out, err := n.ssh(t, "sudo -n /usr/local/sbin/dlami-node-check --mode report --json 2>/dev/null")
		var rep struct {
			report
			Checks []struct{ ID, Status, Message, Evidence string } `json:"checks"`
		}
		if jerr := json.Unmarshal([]byte(out), &rep); jerr != nil {
			t.Fatalf("node check after the upgrade (%v): %v\n%s", err, jerr, out)
		}
		found := false
		for _, c := range rep.Checks {
			if c.ID != "first-boot-packages" {
				continue
			}
			found = true
			if c.Status != "fail" {
				t.Fatalf("first-boot-packages %s after apt-get -y upgrade", c.Status)
			}
			if !strings.Contains(c.Evidence+c.Message, "nvidia-fabricmanager: 595.91.07-1 → 595.99.01-1") {
				t.Errorf("first-boot-packages does not name the Fabric Manager drift: %s\n%s", c.Message, c.Evidence)
			}
		}
		if !found {
			t.Fatalf("no first-boot-packages in the node check's report:\n%s", out)
		}
	})

	t.Run("hung-tool", func(t *testing.T) {
		start := time.Now()
		n := boot(t, "hang", "", map[string]string{
			"usr/bin/lfs":                      "#!/bin/sh\nexec sleep 3600\n",
			"etc/dlami-node-check/config.json": `{"action": "block", "bom_path": "/etc/dlami-bake/manifest.json", "out_dir": "/var/lib/dlami-node-check", "timeout": "15s", "check_timeout": "1m", "before": ["slurmd.service"]}`,
		})
		took := time.Since(start)
		j := n.journal(t)
		if !strings.Contains(j, "dlami-node-check: FAIL") || !strings.Contains(j, "did not finish within its timeout (--timeout 15s)") {
			t.Errorf("journal:\n%s", j)
		}
		if strings.Contains(j, "Started slurmd.service") {
			t.Error("slurmd started although the check timed out")
		}
		if took > 3*time.Minute {
			t.Errorf("the boot took %s with a hung tool and a 15s bound", took)
		}
	})
}

// whiteout in an extra layer is an overlayfs whiteout: the file is gone from the lower layers.
const whiteout = "\x00whiteout"

// simNode is a simulated instance booted from an AMI's layers.
type simNode struct {
	state string
	env   map[string]string
}

// p6B200Launch are the knobs of a fleet node's launch on p6-b200.48xlarge: its launch template
// attaches every EFA interface (cards 0-7) in a group that allows EFA traffic, as a launch
// writes its network knobs (simfleet): the AMI's layers carry the build instance's, whose
// amazon-ebs launch attached none.
const p6B200Launch = "product-name=p6-b200.48xlarge efa-cards=0,1,2,3,4,5,6,7 efa-traffic=allowed"

// bootNode boots a host from layers (plus one layer of extra files) with the launch's knobs
// (instance type and network) and then knobs, and tears it down at the end of the test.
func bootNode(t *testing.T, e ebsEnv, base string, layers []string, name, launch, knobs string, extra map[string]string) *simNode {
	t.Helper()
	dir := outDir(t, "node-check-"+name)
	all := append([]string{}, layers...)
	if len(extra) > 0 {
		l := filepath.Join(dir, "extra-layer")
		for p, content := range extra {
			f := filepath.Join(l, p)
			if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
				t.Fatal(err)
			}
			if content == whiteout {
				if err := syscall.Mknod(f, syscall.S_IFCHR|0o600, 0); err != nil {
					t.Fatalf("whiteout %s: %v", f, err)
				}
				continue
			}
			if err := os.WriteFile(f, []byte(content), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		all = append(all, l)
	}
	n := &simNode{state: filepath.Join(dir, "state")}
	k := launch + " instance-id=i-0nodecheck" + strings.ReplaceAll(name, "-", "")
	if knobs != "" {
		k += " " + knobs
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(e.repo, "test", "simhost", "boot"), n.state)
	// A new instance from the AMI: cloud-init names it after its own address (boot's default,
	// 127.0.0.1), not the build instance's name the AMI's layers carry.
	cmd.Env = append(os.Environ(), "DLAMI_SIM_ROOTFS="+base, "DLAMI_SIM_LAYERS="+strings.Join(all, ":"), "DLAMI_SIM_KNOBS="+k,
		"DLAMI_SIM_HOSTNAME="+simfleet.EC2HostName("127.0.0.1"))
	var outb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &outb, &outb
	err := cmd.Run()
	t.Cleanup(func() {
		if out, err := exec.Command(filepath.Join(e.repo, "test", "simhost", "teardown"), n.state).CombinedOutput(); err != nil {
			t.Errorf("teardown %s: %v\n%s", n.state, err, out)
		}
	})
	if err != nil {
		t.Fatalf("booting %s: %v\n%s", name, err, outb.String())
	}
	n.env = map[string]string{}
	b, err := os.ReadFile(filepath.Join(n.state, "env"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			n.env[k] = v
		}
	}
	return n
}

func (n *simNode) file(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(n.state, "merged", p))
	if err != nil {
		t.Fatalf("%s on the node: %v", p, err)
	}
	return string(b)
}

func (n *simNode) journal(t *testing.T) string { return n.file(t, "run/dlami-sim/journal") }

func (n *simNode) unitState(t *testing.T, u string) string {
	return strings.TrimSpace(n.file(t, "run/dlami-sim/units/"+u))
}

func (n *simNode) report(t *testing.T) report {
	t.Helper()
	var r report
	b := []byte(n.file(t, "var/lib/dlami-node-check/dlami-report.json"))
	if p := schemaProblem(b); p != "" {
		t.Errorf("the node's %s", p)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// ssh runs a command on the node as ubuntu over its real sshd.
func (n *simNode) ssh(t *testing.T, command string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/usr/bin/ssh", "-i", n.env["ssh_private_key_file"], "-p", n.env["ssh_port"],
		"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR",
		"ubuntu@"+n.env["ssh_host"], command)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("%w: %s", err, errb.String())
	}
	return out.String(), err
}
