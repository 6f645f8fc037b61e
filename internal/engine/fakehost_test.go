package engine

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/guard"
	"github.com/dlami-bake/packer-plugin-dlami/internal/host"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/kernlog"
	"github.com/dlami-bake/packer-plugin-dlami/internal/probe"
)

// fakeHost is an in-memory build host that implements host.Host directly: a small model of
// the dpkg database, the running kernel and the boot, answering the guard and host queries by
// section name, and running layers by calling a Go hook that changes the model. The
// end-to-end tests run the same flow against a real sshd, apt and dpkg; this one pins down the
// bake's decisions.
type fakeHost struct {
	mu      sync.Mutex
	t       testing.TB
	running string
	images  []string
	pkgs    map[string]fakePkg
	files   map[string][]byte
	hostOut map[string]fakeSection
	bootID  string
	boots   int
	// jobs answer the other jobs by script name ("efa-traffic.sh", "gdr.sh", "dcgm.sh").
	jobs map[string]func(ctx context.Context, h *fakeHost, j host.Job, w io.Writer) (int, error)
	// underLoad is true while the NCCL test runs.
	underLoad bool
	// dmesgAdd is appended to the kernel log when the NCCL test runs.
	dmesgAdd string
	ncclOut  string
	ncclCode int
	// ncclHook, when set, runs instead of printing ncclOut (e.g. to block until cancelled).
	ncclHook func(ctx context.Context, j host.Job) (int, error)
	// layerHook runs the n-th layer: it changes the model and returns the exit status, or an
	// error such as host.ErrDisconnected.
	layerHook map[int]func(ctx context.Context, h *fakeHost) (int, error)
	layersRun []int
	// onHostBatch, when set, runs before each host-validation query is answered.
	onHostBatch func(h *fakeHost)
	reboots     int
	// rebootTakes and reconnectTakes are how long Reboot and Reconnect take.
	rebootTakes, reconnectTakes time.Duration
	held                        [][]string
	killed                      []string
	// settle is what the first-boot settle command prints.
	settle fakeSection
	// tempDirs are the folders MakeTempDir created, as "parent|prefix|dir".
	tempDirs []string
	// siteOut answers the site checks by name; an unset one prints "ok" and exits 0.
	siteOut map[string]fakeSection
	// removeErr, when set, is what removing a staging folder answers (the connection dropped).
	removeErr error
}

type fakePkg struct {
	version string
	held    bool
}

type fakeSection struct {
	out  string
	code int
}

var _ host.Host = (*fakeHost)(nil)

func newFakeHost(t testing.TB) *fakeHost {
	h := &fakeHost{
		t:       t,
		running: "7.0.0-1014-aws",
		images:  []string{"/boot/vmlinuz-7.0.0-1014-aws"},
		pkgs: map[string]fakePkg{
			"linux-image-7.0.0-1014-aws":   {"7.0.0-1014.14", true},
			"linux-modules-7.0.0-1014-aws": {"7.0.0-1014.14", true},
			"linux-headers-7.0.0-1014-aws": {"7.0.0-1014.14", true},
			"linux-aws":                    {"7.0.0.1014.14", true},
			"nvidia-driver-595-open":       {"595.91.07-0ubuntu0.24.04.1", true},
			"nvidia-fabricmanager-595":     {"595.91.07-1", true},
			"efa":                          {"3.3.0-1", true},
		},
		files:     map[string][]byte{},
		hostOut:   loadSections(t, "../probe/testdata/host/p6-b200-healthy.sections"),
		layerHook: map[int]func(context.Context, *fakeHost) (int, error){},
	}
	h.newBoot()
	h.settle = fakeSection{out: "status: done"}
	// Where jobs run: slurmd installed with the unit's LimitMEMLOCK=infinity, no container
	// runtime.
	h.hostOut["node.unit_memlock"] = fakeSection{out: "Id=slurmd.service\nLoadState=loaded\nLimitMEMLOCK=infinity\n\n" +
		"Id=containerd.service\nLoadState=not-found\nLimitMEMLOCK=8388608\n\nId=docker.service\nLoadState=not-found\nLimitMEMLOCK=8388608\n"}
	h.hostOut["node.docker_daemon_json"] = fakeSection{out: "@@absent"}
	h.hostOut["node.containerd_runtime_spec"] = fakeSection{out: "@@absent"}
	addContainerToolkit(h, 8, false)
	nccl, err := os.ReadFile("../parse/nccltests/testdata/synthetic-p6b200-1node-ok.txt")
	if err != nil {
		t.Fatal(err)
	}
	h.ncclOut = string(nccl)
	return h
}

func (h *fakeHost) newBoot() {
	h.boots++
	h.bootID = fmt.Sprintf("boot-%d", h.boots)
}

// loadSections reads "=== name exit=N" separated section outputs.
func loadSections(t testing.TB, path string) map[string]fakeSection {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]fakeSection{}
	var name string
	var cur fakeSection
	var body []string
	flush := func() {
		if name != "" {
			cur.out = strings.Join(body, "\n")
			out[name] = cur
		}
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "=== "); ok {
			flush()
			f := strings.Fields(rest)
			name, body = f[0], nil
			cur = fakeSection{}
			if len(f) > 1 {
				cur.code, _ = strconv.Atoi(strings.TrimPrefix(f[1], "exit="))
			}
			continue
		}
		body = append(body, line)
	}
	flush()
	return out
}

func (h *fakeHost) guardSection(name string) fakeSection {
	switch {
	case name == "guard.uname":
		return fakeSection{out: h.running}
	case name == "guard.grubenv" || name == "guard.grubcfg":
		return fakeSection{out: "@dlami-guard absent"}
	case name == "guard.vmlinuz":
		return fakeSection{out: strings.Join(h.images, "\n")}
	case name == "guard.dpkg":
		names := make([]string, 0, len(h.pkgs))
		for n := range h.pkgs {
			names = append(names, n)
		}
		sort.Strings(names)
		var b strings.Builder
		for _, n := range names {
			p := h.pkgs[n]
			flag := "ii "
			if p.held {
				flag = "hi "
			}
			fmt.Fprintf(&b, "%s\t%s\t%s\tamd64\n", flag, n, p.version)
		}
		return fakeSection{out: b.String()}
	case name == "guard.dkms":
		return fakeSection{out: "@dlami-guard absent"}
	case name == "guard.baselines":
		var paths []string
		for p := range h.files {
			if strings.HasPrefix(p, guard.BaselineDir+"/baseline") {
				paths = append(paths, p)
			}
		}
		sort.Strings(paths)
		return fakeSection{out: strings.Join(paths, "\n")}
	case strings.HasPrefix(name, "guard.modinfo."):
		switch strings.TrimPrefix(name, "guard.modinfo.") {
		case "efa":
			if h.running == "7.0.0-1014-aws" {
				return fakeSection{out: "3.3.0g"}
			}
		case "nvidia":
			if h.running == "7.0.0-1014-aws" {
				return fakeSection{out: "595.91.07"}
			}
		}
		return fakeSection{out: "modinfo: ERROR: Module " + strings.TrimPrefix(name, "guard.modinfo.") + " not found.", code: 1}
	}
	return fakeSection{out: "no such section in the fake: " + name, code: 127}
}

// Query implements host.Runner by section name: no shell is parsed.
func (h *fakeHost) Query(_ context.Context, cmds []bundle.Command) (map[string]bundle.Section, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.onHostBatch != nil && len(cmds) > 5 && strings.HasPrefix(cmds[0].Name, "host.") {
		h.onHostBatch(h)
	}
	out := map[string]bundle.Section{}
	for _, c := range cmds {
		var s fakeSection
		switch {
		case strings.HasPrefix(c.Name, "guard."):
			s = h.guardSection(c.Name)
		case c.Name == "host.boot_id":
			s = fakeSection{out: h.bootID}
		case c.Name == "host.settle":
			s = h.settle
		case c.Name == "site.list":
			// The site checks the fake image has: the files installed into its directory.
			for f := range h.files {
				if name, ok := strings.CutPrefix(f, probe.SiteChecksDir+"/"); ok {
					s.out += name + "\n"
				}
			}
		case strings.HasPrefix(c.Name, "site."):
			if s = h.siteOut[strings.TrimPrefix(c.Name, "site.")]; s.out == "" && s.code == 0 {
				s = fakeSection{out: "ok"}
			}
		case c.Name == "host.gpu_health" && h.underLoad:
			// Under load the GPUs run their PCIe links at the maximum generation; idle, at gen 1.
			s = h.hostOut[c.Name]
			s.out = strings.ReplaceAll(s.out, ", 1, 5, 16, 16,", ", 5, 5, 16, 16,")
		case c.Name == "host.dmesg":
			s = h.hostOut[c.Name]
			s.out += h.dmesgSoFar()
		case c.Name == "host.journal_kernel":
			s = h.hostOut[c.Name]
			s.out += h.journalSoFar()
		default:
			var ok bool
			if s, ok = h.hostOut[c.Name]; !ok {
				s = fakeSection{out: "sh: command not found", code: 127}
			}
		}
		out[c.Name] = bundle.Section{Name: c.Name, Output: strings.TrimRight(s.out, "\n"), ExitCode: s.code, TimedOut: bundle.TimedOut(s.code)}
	}
	return out, nil
}

// addLimitsFile adds a file to /etc/security/limits.d as a layer writing it would: what a new
// login gets changes, the probe's own session ("host.memlock") does not.
func (h *fakeHost) addLimitsFile(name, text string) {
	s := h.hostOut["host.limits_files"]
	s.out = strings.TrimRight(s.out, "\n") + "\n==> /etc/security/limits.d/" + name
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		s.out += "\n| " + l
	}
	h.hostOut["host.limits_files"] = s
}

// dmesgSoFar is what the kernel logged since boot beyond the fixture.
func (h *fakeHost) dmesgSoFar() string {
	if b, ok := h.files["/dmesg-extra"]; ok {
		return "\n" + string(b)
	}
	return ""
}

// journalSoFar is what journald kept of this boot's kernel log beyond the fixture: the lines
// in /journal-extra (dmesg-style), which clearing the ring buffer (/dmesg-extra) leaves alone,
// in journalctl -o short-monotonic's format with journald's own later timestamps.
func (h *fakeHost) journalSoFar() string {
	b, ok := h.files["/journal-extra"]
	if !ok {
		return ""
	}
	var out strings.Builder
	for i, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		fmt.Fprintf(&out, "\n[%5d.%06d] ip-10-1-42-17 kernel: %s", 900+i, 0, kernlog.Text(l))
	}
	return out.String()
}

// logKernel logs lines (dmesg-style) the way the kernel does: into the ring buffer and, as
// journald reads them, into the journal.
func (h *fakeHost) logKernel(lines string) {
	for _, f := range []string{"/dmesg-extra", "/journal-extra"} {
		if b, ok := h.files[f]; ok {
			if strings.Contains(string(b), lines) {
				continue // the same test's lines again (a second NCCL run): logged once
			}
			h.files[f] = []byte(strings.TrimRight(string(b), "\n") + "\n" + lines)
		} else {
			h.files[f] = []byte(lines)
		}
	}
}

// Run implements host.Runner.
func (h *fakeHost) Run(ctx context.Context, j host.Job) (int, error) {
	h.mu.Lock()
	if j.PIDFile == "" {
		h.t.Errorf("fake host: job %s without a pid file", j.Name)
	}
	w := j.Output
	if w == nil {
		w = io.Discard
	}
	switch {
	case j.AsRoot && strings.HasSuffix(j.Script, "/layer.sh"):
		if _, ok := h.files[j.Script]; !ok {
			h.t.Errorf("fake host: layer script %s was not uploaded", j.Script)
		}
		n := len(h.layersRun)
		h.layersRun = append(h.layersRun, n)
		hook := h.layerHook[n]
		h.mu.Unlock()
		fmt.Fprintf(w, "==> layer %d output\n", n)
		if hook != nil {
			return hook(ctx, h)
		}
		return 0, nil
	case j.AsRoot && strings.HasSuffix(j.Script, "/node-check-enable.sh"):
		h.layersRun = append(h.layersRun, -1) // the node check's enable job, marked
		h.mu.Unlock()
		io.WriteString(w, "Created symlink /etc/systemd/system/multi-user.target.wants/dlami-node-check.service\ndlami-node-check 0.1.0-dev\n")
		return 0, nil
	case !j.AsRoot && strings.HasSuffix(j.Script, "/nccl.sh"):
		if !strings.Contains(string(h.files[j.Script]), "all_reduce_perf") {
			h.t.Errorf("fake host: %s is not the NCCL script", j.Script)
		}
		if h.dmesgAdd != "" {
			h.logKernel(h.dmesgAdd)
		}
		hook, out, code := h.ncclHook, h.ncclOut, h.ncclCode
		h.underLoad = true
		h.mu.Unlock()
		defer func() { h.mu.Lock(); h.underLoad = false; h.mu.Unlock() }()
		if hook != nil {
			return hook(ctx, j)
		}
		// Long enough for the sampler (every millisecond in these tests) to read the GPUs.
		time.Sleep(20 * time.Millisecond)
		io.WriteString(w, out)
		return code, nil
	}
	if hook, ok := h.jobs[path.Base(j.Script)]; ok {
		h.mu.Unlock()
		return hook(ctx, h, j, w)
	}
	h.mu.Unlock()
	h.t.Errorf("fake host: unexpected job %+v", j)
	return 127, nil
}

// Kill implements host.Runner.
func (h *fakeHost) Kill(_ context.Context, j host.Job) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.killed = append(h.killed, j.Name)
	return nil
}

func (h *fakeHost) MakeDir(context.Context, string) error { return nil }

// MakeTempDir implements host.Files with names no clock predicts.
func (h *fakeHost) MakeTempDir(_ context.Context, parent, prefix string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	dir := fmt.Sprintf("%s/%s.fake%04dX", strings.TrimRight(parent, "/"), prefix, len(h.tempDirs)+1)
	h.tempDirs = append(h.tempDirs, parent+"|"+prefix+"|"+dir)
	return dir, nil
}

// uploaded is what was uploaded to path, read under the lock: a job's hook runs while the
// engine uploads the scripts of the jobs that run alongside it.
func (h *fakeHost) uploaded(path string) []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.files[path]
}

func (h *fakeHost) Upload(_ context.Context, dst string, data io.Reader) error {
	var b bytes.Buffer
	if _, err := io.Copy(&b, data); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.files[dst] = b.Bytes()
	return nil
}

func (h *fakeHost) Install(_ context.Context, data []byte, dst string, _ fs.FileMode) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.files[dst] = append([]byte(nil), data...)
	return nil
}

func (h *fakeHost) ReadFile(_ context.Context, path string) ([]byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	b, ok := h.files[path]
	if !ok {
		return nil, fmt.Errorf("reading %s: %w", path, fs.ErrNotExist)
	}
	return b, nil
}

func (h *fakeHost) RemoveAll(_ context.Context, path string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.removeErr != nil && strings.Contains(path, "/dlami-") {
		return h.removeErr
	}
	for p := range h.files {
		if p == path || strings.HasPrefix(p, path+"/") {
			delete(h.files, p)
		}
	}
	return nil
}

func (h *fakeHost) Hold(_ context.Context, pkgs []string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held = append(h.held, pkgs)
	for _, n := range pkgs {
		p := h.pkgs[n]
		p.held = true
		h.pkgs[n] = p
	}
	return nil
}

func (h *fakeHost) BootID(context.Context) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.bootID, nil
}

// Reboot implements host.Power: the simulated boot loader boots the newest installed image.
func (h *fakeHost) Reboot(ctx context.Context) error {
	if err := h.wait(ctx, h.rebootTakes); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rebootLocked()
	return nil
}

func (h *fakeHost) rebootLocked() {
	h.reboots++
	h.running = strings.TrimPrefix(h.images[len(h.images)-1], "/boot/vmlinuz-")
	delete(h.files, "/dmesg-extra")
	// journalctl -b 0 shows only the new boot.
	delete(h.files, "/journal-extra")
	h.newBoot()
}

func (h *fakeHost) Reconnect(ctx context.Context) error { return h.wait(ctx, h.reconnectTakes) }

// wait is how long a reboot or a reconnection takes on the fake (0: at once), cut short by ctx.
func (h *fakeHost) wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// installKernel1015 is what `apt-get install linux-image-7.0.0-1015-aws` does to the model.
func installKernel1015(h *fakeHost) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pkgs["linux-image-7.0.0-1015-aws"] = fakePkg{"7.0.0-1015.15", false}
	h.images = append(h.images, "/boot/vmlinuz-7.0.0-1015-aws")
}

// selfReboot is a layer whose vendor script reboots the host: the connection drops.
func selfReboot(ctx context.Context, h *fakeHost) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rebootLocked()
	return 0, fmt.Errorf("layer: %w", host.ErrDisconnected)
}

type recordingUI struct {
	mu  sync.Mutex
	out strings.Builder
}

func (u *recordingUI) Say(s string)     { u.write(s) }
func (u *recordingUI) Message(s string) { u.write(s) }
func (u *recordingUI) Error(s string)   { u.write("ERROR " + s) }
func (u *recordingUI) write(s string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.out.WriteString(s + "\n")
}

func (u *recordingUI) String() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.out.String()
}
