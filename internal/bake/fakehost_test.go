package bake

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/guard"
)

// fakeHost is a scripted stand-in for the build host: it keeps a small model of the dpkg
// database and the running kernel, answers the guard, host and NCCL bundles from that model,
// and runs layers by calling a Go hook that changes the model. The end-to-end tests run the
// same flow against a real sshd, apt and dpkg; this one pins down the bake's decisions.
type fakeHost struct {
	mu        sync.Mutex
	t         *testing.T
	running   string
	images    []string
	pkgs      map[string]fakePkg
	files     map[string][]byte
	hostOut   map[string]fakeSection
	ncclOut   string
	ncclCode  int
	layerHook map[int]func(h *fakeHost) int
	layersRun []int
	// onHostBatch, when set, runs before each host-validation batch is answered.
	onHostBatch func(h *fakeHost)
	reboots     int
	commands    []string
}

type fakePkg struct {
	version string
	held    bool
}

type fakeSection struct {
	out  string
	code int
}

func newFakeHost(t *testing.T) *fakeHost {
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
			"jq":                           {"", false},
		},
		files:     map[string][]byte{},
		hostOut:   loadSections(t, "testdata/host-p6-b200-healthy.sections"),
		layerHook: map[int]func(*fakeHost) int{},
	}
	delete(h.pkgs, "jq")
	nccl, err := os.ReadFile("testdata/nccl-p6b200-1node-ok.txt")
	if err != nil {
		t.Fatal(err)
	}
	h.ncclOut = string(nccl)
	return h
}

// loadSections reads "=== name exit=N" separated section outputs.
func loadSections(t *testing.T, path string) map[string]fakeSection {
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

var beginRE = regexp.MustCompile(`echo '(@@DLAMI-BUNDLE-[0-9a-f]+@@) BEGIN ([^']+)'`)

func (h *fakeHost) guardSection(name string) fakeSection {
	switch {
	case name == guard.SectionRunning:
		return fakeSection{out: h.running}
	case name == guard.SectionGrubEnv || name == guard.SectionGrubCfg:
		return fakeSection{out: "@dlami-guard absent"}
	case name == guard.SectionBootImages:
		return fakeSection{out: strings.Join(h.images, "\n")}
	case name == guard.SectionPackages:
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
	case name == guard.SectionDKMS:
		return fakeSection{out: "@dlami-guard absent"}
	case strings.HasPrefix(name, guard.SectionModinfoPrefix):
		switch strings.TrimPrefix(name, guard.SectionModinfoPrefix) {
		case "efa":
			if h.running == "7.0.0-1014-aws" {
				return fakeSection{out: "3.3.0g"}
			}
		case "nvidia":
			if h.running == "7.0.0-1014-aws" {
				return fakeSection{out: "595.91.07"}
			}
		}
		return fakeSection{out: "modinfo: ERROR: Module " + strings.TrimPrefix(name, guard.SectionModinfoPrefix) + " not found.", code: 1}
	}
	return fakeSection{out: "no such section in the fake: " + name, code: 127}
}

func (h *fakeHost) bundle(script string) string {
	var b strings.Builder
	for _, m := range beginRE.FindAllStringSubmatch(script, -1) {
		marker, name := m[1], m[2]
		var s fakeSection
		if strings.HasPrefix(name, "guard.") {
			s = h.guardSection(name)
		} else if hs, ok := h.hostOut[name]; ok {
			s = hs
		} else {
			s = fakeSection{out: "sh: command not found", code: 127}
		}
		fmt.Fprintf(&b, "%s BEGIN %s\n%s\n\n%s END %s %d 3\n", marker, name, strings.TrimRight(s.out, "\n"), marker, name, s.code)
	}
	return b.String()
}

var (
	quotedRE = regexp.MustCompile(`'([^']*)'`)
	layerRE  = regexp.MustCompile(`/layer-(\d+)/layer\.sh`)
)

func (h *fakeHost) Run(_ context.Context, cmd string, stdin io.Reader, stdout, _ io.Writer) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.commands = append(h.commands, cmd)
	if stdout == nil {
		stdout = io.Discard
	}
	if stdin != nil {
		h.t.Errorf("fake host: command %q was given stdin", cmd)
	}
	var script string
	if q, ok := strings.CutPrefix(cmd, "sh -c '"); ok {
		script = strings.ReplaceAll(strings.TrimSuffix(q, "'"), `'\''`, "'")
		cmd = "sh -s"
	}
	switch {
	case cmd == "sh -s" && (strings.Contains(script, "BEGIN guard.") || strings.Contains(script, "BEGIN host.")):
		if h.onHostBatch != nil && strings.Contains(script, "BEGIN host.") {
			h.onHostBatch(h)
		}
		io.WriteString(stdout, h.bundle(script))
		return 0, nil
	case cmd == "sh -s" && strings.Contains(script, guard.BaselinePath):
		if b, ok := h.files[guard.BaselinePath]; ok {
			stdout.Write(b)
		} else {
			io.WriteString(stdout, "__DLAMI_NO_BASELINE__\n")
		}
		return 0, nil
	case strings.HasPrefix(cmd, "sh '") && strings.HasSuffix(cmd, "/nccl.sh'"):
		if !strings.Contains(string(h.files[strings.Trim(cmd[3:], "'")]), "all_reduce_perf") {
			h.t.Errorf("fake host: %s is not the NCCL script", cmd)
		}
		io.WriteString(stdout, h.ncclOut)
		return h.ncclCode, nil
	case strings.HasPrefix(cmd, "mkdir -p"), strings.Contains(cmd, "rm -rf"), cmd == "true", cmd == "uname -r":
		if cmd == "uname -r" {
			io.WriteString(stdout, h.running+"\n")
		}
		return 0, nil
	case strings.HasPrefix(cmd, "sudo -n install -D"):
		q := quotedRE.FindAllStringSubmatch(cmd, -1)
		h.files[q[2][1]] = h.files[q[1][1]]
		return 0, nil
	case strings.HasPrefix(cmd, "sudo -n apt-mark hold"):
		for _, q := range quotedRE.FindAllStringSubmatch(cmd, -1) {
			p := h.pkgs[q[1]]
			p.held = true
			h.pkgs[q[1]] = p
		}
		return 0, nil
	case strings.HasPrefix(cmd, "sudo -n /bin/sh"):
		m := layerRE.FindStringSubmatch(cmd)
		n, _ := strconv.Atoi(m[1])
		h.layersRun = append(h.layersRun, n)
		if hook, ok := h.layerHook[n]; ok {
			return hook(h), nil
		}
		return 0, nil
	case strings.HasPrefix(cmd, "sudo -n sh -c '(sleep 1; reboot"):
		h.reboots++
		// The simulated boot loader boots the newest installed image.
		newest := h.images[len(h.images)-1]
		h.running = strings.TrimPrefix(newest, "/boot/vmlinuz-")
		return 0, errDisconnectedForTest
	}
	h.t.Errorf("fake host: unexpected command %q", cmd)
	return 127, nil
}

func (h *fakeHost) Upload(_ context.Context, dst string, data io.Reader) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b bytes.Buffer
	if _, err := io.Copy(&b, data); err != nil {
		return err
	}
	h.files[dst] = b.Bytes()
	return nil
}

// installKernel1015 is what `apt-get install linux-image-7.0.0-1015-aws` does to the model.
func installKernel1015(h *fakeHost) {
	h.pkgs["linux-image-7.0.0-1015-aws"] = fakePkg{"7.0.0-1015.15", false}
	h.images = append(h.images, "/boot/vmlinuz-7.0.0-1015-aws")
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
