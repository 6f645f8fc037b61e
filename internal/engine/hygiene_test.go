package engine

import (
	"context"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/host"
	"github.com/dlami-bake/packer-plugin-dlami/internal/layer"
	"github.com/dlami-bake/packer-plugin-dlami/internal/probe"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

const buildKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeBuildKeyBlob+/= packer_1"

// cleanProbe is what the probe prints on an image image hygiene cleaned.
const cleanProbe = `keys /root/.ssh/authorized_keys lines=1 build=0
keys /home/ubuntu/.ssh/authorized_keys lines=0 build=0
hostkeys 0
machine-id size=0
dbus-machine-id absent
logs nonempty=2
imex-nodes-config /etc/nvidia-imex/nodes_config.cfg absent
done`

// hygieneHost is a fake host whose image hygiene job records when it ran and what its script
// said, and whose probe answers probe.
func hygieneHost(t *testing.T, probe fakeSection, order *[]string, script *string) *fakeHost {
	h := newFakeHost(t)
	h.hostOut["hygiene.state"] = probe
	h.jobs = map[string]func(context.Context, *fakeHost, host.Job, io.Writer) (int, error){
		"image-hygiene.sh": func(_ context.Context, h *fakeHost, j host.Job, w io.Writer) (int, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			if !j.AsRoot {
				t.Error("image hygiene must run as root")
			}
			*script = string(h.files[j.Script])
			if _, ok := h.files["/etc/dlami-bake/manifest.json"]; ok {
				*order = append(*order, "hygiene after the bill of materials")
			} else {
				*order = append(*order, "hygiene BEFORE the bill of materials")
			}
			io.WriteString(w, "dlami-hygiene: removed /etc/ssh/ssh_host_*\n")
			return 0, nil
		},
	}
	return h
}

// image_hygiene is the bake's very last step, after the bill of materials, on every plan; its
// script removes only the build key's lines (user and key quoted), and the check passes on a
// clean read-back. Without the setting nothing runs and no check is reported.
func TestImageHygieneIsTheLastStep(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(*Options)
	}{
		{"validated bake", func(*Options) {}},
		{"two-phase first phase", func(o *Options) { o.DeferValidation = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var order []string
			var script string
			h := hygieneHost(t, fakeSection{out: cleanProbe}, &order, &script)
			opt := options(t, layer.Spec{Name: "a", Inline: []string{"true"}})
			tc.setup(&opt)
			opt.ImageHygiene = &Hygiene{LoginUser: "it's-ubuntu", BuildKey: buildKey}
			ui := &recordingUI{}
			if err := Run(context.Background(), h, ui, opt); err != nil {
				t.Fatalf("bake: %v\n%s", err, ui)
			}
			if !slices.Equal(order, []string{"hygiene after the bill of materials"}) {
				t.Errorf("image hygiene ran: %v", order)
			}
			for _, want := range []string{"user=" + bundle.Quote("it's-ubuntu"), "blob='AAAAC3NzaC1lZDI1NTE5AAAAIFakeBuildKeyBlob+/='", "rm -f /etc/ssh/ssh_host_*", ": >/etc/machine-id", "/var/lib/cloud/instances"} {
				if !strings.Contains(script, want) {
					t.Errorf("hygiene script lacks %q", want)
				}
			}
			r := readReport(t, opt.ReportDir)
			c := check(r, result.ImageHygiene)
			if c.Status != "pass" || !strings.Contains(c.Evidence, "removed /etc/ssh/ssh_host_*") || !strings.Contains(c.Evidence, "machine-id size=0") {
				t.Errorf("image-hygiene %+v", c)
			}
			if last := r.Checks[len(r.Checks)-1].ID; last != result.ImageHygiene {
				t.Errorf("last entry %s, want image-hygiene", last)
			}
		})
	}

	var order []string
	var script string
	h := hygieneHost(t, fakeSection{out: cleanProbe}, &order, &script)
	opt := options(t)
	if err := Run(context.Background(), h, &recordingUI{}, opt); err != nil {
		t.Fatal(err)
	}
	if len(order) != 0 || status(readReport(t, opt.ReportDir), result.ImageHygiene) != "missing" {
		t.Errorf("without image_hygiene: ran %v, check %s", order, status(readReport(t, opt.ReportDir), result.ImageHygiene))
	}
}

// What is left after the cleanup fails the bake, naming it; an answer that cannot be read
// fails closed; an unknown build key only warns.
func TestImageHygieneJudgesTheReadBack(t *testing.T) {
	for _, tc := range []struct {
		name   string
		probe  fakeSection
		key    string
		status string
		want   string
	}{
		{"clean", fakeSection{out: cleanProbe}, buildKey, "pass", ""},
		{"build key left", fakeSection{out: strings.Replace(cleanProbe, "lines=0 build=0", "lines=1 build=1", 1)}, buildKey, "fail", "/home/ubuntu/.ssh/authorized_keys still holds the build key"},
		{"host keys left", fakeSection{out: strings.Replace(cleanProbe, "hostkeys 0", "hostkeys 1 /etc/ssh/ssh_host_ed25519_key", 1)}, buildKey, "fail", "SSH host keys left: /etc/ssh/ssh_host_ed25519_key"},
		{"machine id kept", fakeSection{out: strings.Replace(cleanProbe, "machine-id size=0", "machine-id size=33", 1)}, buildKey, "fail", "/etc/machine-id is not empty"},
		{"machine id missing", fakeSection{out: strings.Replace(cleanProbe, "machine-id size=0", "machine-id absent", 1)}, buildKey, "fail", "/etc/machine-id is missing"},
		{"cloud-init state", fakeSection{out: strings.Replace(cleanProbe, "logs", "cloud /var/lib/cloud/instances present\nlogs", 1)}, buildKey, "fail", "cloud-init instance state left: /var/lib/cloud/instances"},
		{"history", fakeSection{out: strings.Replace(cleanProbe, "logs", "history /root/.bash_history size=120\nlogs", 1)}, buildKey, "fail", "shell history left: /root/.bash_history"},
		{"IMEX placeholder list", fakeSection{out: strings.Replace(cleanProbe, "cfg absent", "cfg present 0", 1)}, buildKey, "pass", ""},
		{"IMEX list of real addresses", fakeSection{out: strings.Replace(cleanProbe, "cfg absent", "cfg present 2 10.1.42.17 10.1.42.18", 1)}, buildKey, "fail",
			"/etc/nvidia-imex/nodes_config.cfg holds 2 real address(es) (10.1.42.17 10.1.42.18): IMEX requires every node's list to match"},
		{"IMEX list line cut", fakeSection{out: strings.Replace(cleanProbe, "cfg absent", "cfg present x", 1)}, buildKey, "fail", "unreadable line"},
		{"sudo refused", fakeSection{out: "sudo: a password is required", code: 1}, buildKey, "fail", "reading the image's state as root"},
		{"cut short", fakeSection{out: "keys /root/.ssh/authorized_keys lines=1 build=0\nhostkeys 0"}, buildKey, "fail", "reading the image's state"},
		{"a line cut short", fakeSection{out: strings.Replace(cleanProbe, "logs", "history /root/.bash_history\nlogs", 1)}, buildKey, "fail", `unreadable line "history /root/.bash_history"`},
		{"no answer for a fact", fakeSection{out: "hostkeys 0\nlogs nonempty=0\ndone"}, buildKey, "fail", "no answer for machine-id"},
		{"unknown build key", fakeSection{out: cleanProbe}, "", "warn", "the key Packer logged in with is not known"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var order []string
			var script string
			h := hygieneHost(t, tc.probe, &order, &script)
			opt := options(t)
			opt.ImageHygiene = &Hygiene{LoginUser: "ubuntu", BuildKey: tc.key}
			err := Run(context.Background(), h, &recordingUI{}, opt)
			r := readReport(t, opt.ReportDir)
			c := check(r, result.ImageHygiene)
			if c.Status != tc.status || !strings.Contains(c.Message, tc.want) {
				t.Errorf("image-hygiene %s %q, want %s %q", c.Status, c.Message, tc.status, tc.want)
			}
			if (tc.status == "fail") != (err != nil) || (err != nil && !strings.Contains(err.Error(), "image hygiene failed")) {
				t.Errorf("bake error %v for a %s check", err, tc.status)
			}
			if tc.key == "" && strings.Contains(script, "blob=''") == false {
				t.Errorf("unknown key: script does not leave the blob empty")
			}
		})
	}
}

// The cleanup is valid sh whatever the user name and key hold, and runs as root.
func TestHygieneScriptParses(t *testing.T) {
	s := probe.HygieneScript("a'b $(touch /tmp/x)", buildKey)
	if out, err := exec.Command("/bin/sh", "-n", "-c", s.Text).CombinedOutput(); err != nil {
		t.Errorf("cleanup: %v: %s", err, out)
	}
	if !s.AsRoot {
		t.Error("the cleanup must run as root")
	}
}

// Whatever the probe prints, the judge neither panics nor passes an answer that lacks its
// closing "done" line or came from a failed read.
func FuzzJudgeHygiene(f *testing.F) {
	f.Add(cleanProbe, 0, buildKey)
	f.Add("history /root/.bash_history\ndone", 0, buildKey)
	f.Add("keys /root/.ssh/authorized_keys lines=1 build=1\nhostkeys 2 a b\ndone", 0, "")
	f.Add("sudo: a password is required", 1, buildKey)
	f.Fuzz(func(t *testing.T, out string, code int, key string) {
		hy := facts.Hygiene{BuildKeyKnown: len(strings.Fields(key)) >= 2, State: probe.ParseHygieneState(bundle.Section{Output: out, ExitCode: code})}
		c := checks.JudgePhase(checks.PhaseImage, facts.Run{Hygiene: hy}, checks.Target{})[0]
		lines := strings.Split(strings.TrimSpace(out), "\n")
		closed := code == 0 && lines[len(lines)-1] == "done"
		if !closed && !c.Status.Failing() {
			t.Errorf("judged %s on an answer without its closing line (exit %d): %q", c.Status, code, out)
		}
		if c.Status == result.Pass && len(strings.Fields(key)) < 2 {
			t.Errorf("passed without knowing the build key: %q", out)
		}
	})
}
