package guard

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/dkms"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

const (
	k14 = "7.0.0-1014-aws"
	k15 = "7.0.0-1015-aws"
)

// baseline is the snapshot of the DLAMI fixture host as probe.ParseSnapshot reads it
// (internal/probe/testdata/dlami-bundle.txt): the guard is judged on typed snapshots.
func baseline(t testing.TB) Snapshot {
	t.Helper()
	b, err := os.ReadFile("testdata/dlami-snapshot.json")
	if err != nil {
		t.Fatal(err)
	}
	s, err := DecodeSnapshot(b)
	if err != nil {
		t.Fatalf("DecodeSnapshot: %v", err)
	}
	return s
}

// clone deep-copies through the baseline file format, which also exercises Encode/Decode.
func clone(t testing.TB, s Snapshot) Snapshot {
	t.Helper()
	b, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	c, err := DecodeSnapshot(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// held is the baseline after the provisioner has put every guarded package on hold.
func held(t testing.TB) (Snapshot, []string) {
	t.Helper()
	s := clone(t, baseline(t))
	g := Guarded(s, settings.GuardPolicy{})
	for _, n := range g {
		p := s.Packages[n]
		p.Held = true
		p.Status = "h" + p.Status[1:]
		s.Packages[n] = p
	}
	return s, g
}

func setPkg(s *Snapshot, name, status, version string) {
	s.Packages[name] = Package{Version: version, Status: status, Held: status[0] == 'h', Installed: status[1] == 'i', Arch: "amd64"}
}

func TestGuardedDefaults(t *testing.T) {
	s := baseline(t)
	got := Guarded(s, settings.GuardPolicy{})
	want := []string{
		"efa", "efa-nv-peermem", "gdrcopy", "gdrdrv-dkms", "libgdrapi",
		"libnvidia-compute-595", "libnvidia-nscq-595",
		"linux-aws", "linux-aws-headers-7.0.0-1014", "linux-headers-" + k14, "linux-headers-aws",
		"linux-image-" + k14, "linux-image-aws", "linux-modules-" + k14, "linux-modules-extra-" + k14,
		"linux-modules-nvidia-595-open-" + k14, "linux-modules-nvidia-595-open-aws",
		"lustre-client-modules-" + k14, "lustre-client-utils",
		"nvidia-dkms-595-open", "nvidia-driver-595-open", "nvidia-fabricmanager-595",
		"nvidia-kernel-common-595", "nvidia-kernel-source-595-open", "nvidia-utils-595",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Guarded:\n got %q\nwant %q", got, want)
	}
	// Not guarded: the rc'd old kernel, the un firmware, userspace EFA.
	for _, n := range []string{"linux-image-6.17.0-1019-aws", "nvidia-firmware-595", "efa-config", "ibverbs-providers", "libfabric-aws-bin"} {
		for _, g := range got {
			if g == n {
				t.Errorf("%s guarded by default", n)
			}
		}
	}
	p := settings.GuardPolicy{Include: []string{"efa-config", "libfabric-aws*", "not-on-host"}, Exclude: []string{"lustre-*", "gdrcopy"}}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	got = Guarded(s, p)
	has := toSet(got)
	for _, n := range []string{"efa-config", "libfabric-aws-bin", "not-on-host"} {
		if !has[n] {
			t.Errorf("Include %s: not guarded", n)
		}
	}
	for _, n := range []string{"lustre-client-utils", "lustre-client-modules-" + k14, "gdrcopy"} {
		if has[n] {
			t.Errorf("Exclude: %s still guarded", n)
		}
	}
	if err := (settings.GuardPolicy{Include: []string{"linux-[aws"}}).Validate(); err == nil {
		t.Error("Validate accepted a malformed pattern")
	}
}

func TestUnheldOnRawDLAMI(t *testing.T) {
	s := baseline(t)
	g := Union(Guarded(s, settings.GuardPolicy{}), []string{"not-on-host"})
	got := Unheld(s, g)
	want := []string{"efa", "efa-nv-peermem", "gdrcopy", "gdrdrv-dkms", "libgdrapi", "libnvidia-compute-595", "libnvidia-nscq-595",
		"lustre-client-modules-" + k14, "lustre-client-utils", "nvidia-utils-595"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Unheld:\n got %q\nwant %q", got, want)
	}
	if m := Missing(s, g); !reflect.DeepEqual(m, []string{"not-on-host"}) {
		t.Errorf("Missing = %q", m)
	}
	// An image that holds less than the guard watches warns at the baseline, naming the
	// packages and the remedy; a package named but absent fails.
	c := Judge(s, s, Guarded(s, settings.GuardPolicy{}), "baseline", Options{})
	if c[1].ID != result.Holds || c[1].Status != result.Warn || !strings.Contains(c[1].Message, "10 guarded packages are not on hold (efa, ") ||
		!strings.Contains(c[1].Message, "hold_unheld = true") || !strings.Contains(c[1].Message, "require_holds = true") {
		t.Errorf("holds on a partly held DLAMI: %s %q", c[1].Status, c[1].Message)
	}
	c = Judge(s, s, Guarded(s, settings.GuardPolicy{}), "baseline", Options{RequireHolds: true})
	if c[1].Status != result.Fail || c[1].Basis != "setting require_holds" {
		t.Errorf("require_holds: %s %q", c[1].Status, c[1].Basis)
	}
	c = Judge(s, s, g, "baseline", Options{})
	if c[1].Status != result.Fail || !strings.Contains(c[1].Message, "not-on-host: guarded (guard.include) but not installed") {
		t.Errorf("missing include: %s %q", c[1].Status, c[1].Message)
	}
	for _, i := range []int{0, 2, 3, 4} {
		if c[i].Status != result.Pass {
			t.Errorf("%s on the untouched baseline: %s %q", c[i].ID, c[i].Status, c[i].Message)
		}
	}
}

// The default set covers both NVIDIA namings and every kernel package, and leaves the
// container toolkit to the layers.
func TestGuardedCoversEveryLayout(t *testing.T) {
	s := baseline(t)
	for _, n := range []string{
		// NVIDIA's 590+ repository (unversioned).
		"nvidia-open", "nvidia-driver-open", "nvidia-dkms-open", "nvidia-kernel-common", "libnvidia-compute",
		"libnvidia-cfg1", "nvidia-firmware", "nvidia-fabricmanager", "libnvidia-nscq", "nvidia-imex",
		"nvidia-fs", "nvidia-fs-dkms", "nvidia-driver-pinning-595", "cuda-drivers", "nvlsm", "libnvsdm",
		// Ubuntu's archive (-server).
		"nvidia-driver-595-server-open", "linux-modules-nvidia-595-server-open-" + k14, "nvidia-fabricmanager-595",
		// Any kernel, not only the running one.
		"linux-headers-" + k15, "linux-aws-7.0-headers-7.0.0-1015", "linux-image-unsigned-" + k15, "linux-modules-extra-" + k15,
		// The container toolkit.
		"nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container1", "libnvidia-container-tools",
		// Unrelated.
		"linux-libc-dev", "linux-tools-" + k14, "jq",
	} {
		setPkg(&s, n, "ii ", "1")
	}
	g := toSet(Guarded(s, settings.GuardPolicy{}))
	for _, n := range []string{"nvidia-open", "nvidia-driver-open", "nvidia-dkms-open", "nvidia-kernel-common", "libnvidia-compute",
		"libnvidia-cfg1", "nvidia-firmware", "nvidia-fabricmanager", "libnvidia-nscq", "nvidia-imex", "nvidia-fs", "nvidia-fs-dkms",
		"nvidia-driver-pinning-595", "cuda-drivers", "nvlsm", "libnvsdm", "nvidia-driver-595-server-open",
		"linux-modules-nvidia-595-server-open-" + k14, "nvidia-fabricmanager-595", "linux-headers-" + k15,
		"linux-aws-7.0-headers-7.0.0-1015", "linux-image-unsigned-" + k15, "linux-modules-extra-" + k15} {
		if !g[n] {
			t.Errorf("%s is not guarded", n)
		}
	}
	for _, n := range []string{"nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container1",
		"libnvidia-container-tools", "linux-libc-dev", "linux-tools-" + k14, "jq"} {
		if g[n] {
			t.Errorf("%s is guarded", n)
		}
	}
	// A team that wants the toolkit frozen too can say so.
	if !toSet(Guarded(s, settings.GuardPolicy{Include: []string{"nvidia-container-toolkit*"}}))["nvidia-container-toolkit"] {
		t.Error("guard.include does not win over the default exclusions")
	}
	for _, r := range append(append([]Rule{}, DefaultRules...), DefaultExcludes...) {
		if r.Why == "" {
			t.Errorf("pattern %s has no reason", r.Pattern)
		}
	}
}

func TestJudgeScenarios(t *testing.T) {
	type st = result.Status
	P, F, W := result.Pass, result.Fail, result.Warn
	_ = W
	tests := []struct {
		name   string
		mutate func(*Snapshot)
		opt    Options
		// statuses in CheckIDs order: kernel, holds, packages, next-boot, dkms
		want       [5]st
		wantDrifts []string
	}{
		{
			name:   "clean",
			mutate: func(*Snapshot) {},
			want:   [5]st{P, P, P, P, P},
		},
		{
			name: "apt-mark unhold + upgrade pulls 7.0.0-1015-aws",
			mutate: func(s *Snapshot) {
				for _, m := range []string{"linux-aws", "linux-image-aws", "linux-headers-aws"} {
					setPkg(s, m, "ii ", "7.0.0.1015.15")
				}
				setPkg(s, "linux-image-"+k15, "ii ", "7.0.0-1015.15")
				setPkg(s, "linux-modules-"+k15, "ii ", "7.0.0-1015.15")
				setPkg(s, "linux-headers-"+k15, "ii ", "7.0.0-1015.15")
				s.InstalledKernelImages = []string{k15, k14}
				s.NextBootKernel = k15
				s.DKMS = append(s.DKMS, dkms.Entry{Module: "efa", Version: "3.3.0", Kernel: k15, Arch: "x86_64", State: "installed"})
			},
			want: [5]st{P, F, F, F, P},
			wantDrifts: []string{
				"next-boot kernel: 7.0.0-1014-aws → 7.0.0-1015-aws",
				"/boot/vmlinuz-7.0.0-1015-aws: (absent) → installed",
				"linux-aws: 7.0.0.1014.14 → 7.0.0.1015.15",
				"linux-headers-7.0.0-1015-aws: (absent) → 7.0.0-1015.15",
				"linux-headers-aws: 7.0.0.1014.14 → 7.0.0.1015.15",
				"linux-image-7.0.0-1015-aws: (absent) → 7.0.0-1015.15",
				"linux-image-aws: 7.0.0.1014.14 → 7.0.0.1015.15",
				"linux-modules-7.0.0-1015-aws: (absent) → 7.0.0-1015.15",
				"linux-aws: held → not held",
				"linux-headers-aws: held → not held",
				"linux-image-aws: held → not held",
			},
		},
		{
			name: "new kernel installed, holds intact",
			mutate: func(s *Snapshot) {
				setPkg(s, "linux-image-"+k15, "ii ", "7.0.0-1015.15")
				setPkg(s, "linux-modules-"+k15, "ii ", "7.0.0-1015.15")
				s.InstalledKernelImages = []string{k15, k14}
				s.NextBootKernel = k15
			},
			// Any kernel package other than the running kernel's is drift, held or not;
			// the new ones are not held, which warns.
			want: [5]st{P, W, F, F, P},
			wantDrifts: []string{
				"next-boot kernel: 7.0.0-1014-aws → 7.0.0-1015-aws",
				"/boot/vmlinuz-7.0.0-1015-aws: (absent) → installed",
				"linux-image-7.0.0-1015-aws: (absent) → 7.0.0-1015.15",
				"linux-modules-7.0.0-1015-aws: (absent) → 7.0.0-1015.15",
			},
		},
		{
			name:       "only headers of another kernel",
			mutate:     func(s *Snapshot) { setPkg(s, "linux-headers-"+k15, "ii ", "7.0.0-1015.15") },
			want:       [5]st{P, W, F, P, P},
			wantDrifts: []string{"linux-headers-7.0.0-1015-aws: (absent) → 7.0.0-1015.15"},
		},
		{
			name:       "container toolkit upgraded",
			mutate:     func(s *Snapshot) { setPkg(s, "nvidia-container-toolkit", "ii ", "1.20.2-1") },
			want:       [5]st{P, P, P, P, P},
			wantDrifts: nil,
		},
		{
			name:       "hold lifted alone",
			mutate:     func(s *Snapshot) { setPkg(s, "linux-image-"+k14, "ii ", "7.0.0-1014.14") },
			want:       [5]st{P, F, P, P, P},
			wantDrifts: []string{"linux-image-7.0.0-1014-aws: held → not held"},
		},
		{
			name:       "module version changed",
			mutate:     func(s *Snapshot) { s.ModuleVersions["nvidia"] = Module{Present: true, Version: "595.100.01"} },
			want:       [5]st{P, P, P, P, F},
			wantDrifts: []string{"module nvidia: 595.91.07 → 595.100.01"},
		},
		{
			name:       "module disappeared",
			mutate:     func(s *Snapshot) { s.ModuleVersions["lustre"] = Module{} },
			want:       [5]st{P, P, P, P, F},
			wantDrifts: []string{"module lustre: 2.15.6 → (absent)"},
		},
		{
			name: "dkms built for another kernel",
			mutate: func(s *Snapshot) {
				for i, e := range s.DKMS {
					if e.Module == "efa" {
						s.DKMS[i].Kernel = k15
					}
				}
			},
			want:       [5]st{P, P, P, P, F},
			wantDrifts: []string{"dkms efa: 3.3.0 installed for 7.0.0-1014-aws → 3.3.0 installed for 7.0.0-1015-aws; not installed for 7.0.0-1014-aws"},
		},
		{
			name: "dkms only built, not installed",
			mutate: func(s *Snapshot) {
				for i, e := range s.DKMS {
					if e.Module == "gdrdrv" {
						s.DKMS[i].State = "built"
					}
				}
			},
			want:       [5]st{P, P, P, P, F},
			wantDrifts: []string{"dkms gdrdrv: 2.5.2 installed for 7.0.0-1014-aws → 2.5.2 built for 7.0.0-1014-aws; not installed for 7.0.0-1014-aws"},
		},
		{
			name:   "dkms removed entirely",
			mutate: func(s *Snapshot) { s.DKMS, s.DKMSAvailable = nil, false },
			want:   [5]st{P, P, P, P, F},
			wantDrifts: []string{
				"dkms efa: 3.3.0 installed for 7.0.0-1014-aws → (absent)",
				"dkms efa-nv-peermem: 1.2.1 installed for 7.0.0-1014-aws → (absent)",
				"dkms gdrdrv: 2.5.2 installed for 7.0.0-1014-aws → (absent)",
				"dkms nvidia: 595.91.07 installed for 7.0.0-1014-aws → (absent)",
			},
		},
		{
			name: "rebooted into a new kernel",
			mutate: func(s *Snapshot) {
				s.RunningKernel = k15
				setPkg(s, "linux-image-"+k15, "ii ", "7.0.0-1015.15")
				s.InstalledKernelImages = []string{k15, k14}
				s.NextBootKernel = k15
			},
			want: [5]st{F, W, F, F, F},
			wantDrifts: []string{
				"running kernel: 7.0.0-1014-aws → 7.0.0-1015-aws",
				"next-boot kernel: 7.0.0-1014-aws → 7.0.0-1015-aws",
				"/boot/vmlinuz-7.0.0-1015-aws: (absent) → installed",
				"linux-image-7.0.0-1015-aws: (absent) → 7.0.0-1015.15",
				"dkms efa: 3.3.0 installed for 7.0.0-1014-aws → 3.3.0 installed for 7.0.0-1014-aws; not installed for 7.0.0-1015-aws",
				"dkms efa-nv-peermem: 1.2.1 installed for 7.0.0-1014-aws → 1.2.1 installed for 7.0.0-1014-aws; not installed for 7.0.0-1015-aws",
				"dkms gdrdrv: 2.5.2 installed for 7.0.0-1014-aws → 2.5.2 installed for 7.0.0-1014-aws; not installed for 7.0.0-1015-aws",
				"dkms nvidia: 595.91.07 installed for 7.0.0-1014-aws → 595.91.07 installed for 7.0.0-1014-aws; not installed for 7.0.0-1015-aws",
			},
		},
		{
			name:   "pinned kernel differs",
			mutate: func(*Snapshot) {},
			opt:    Options{PinnedKernel: "7.0.0-1019-aws"},
			want:   [5]st{F, P, P, F, P},
		},
		{
			name:       "guarded package removed",
			mutate:     func(s *Snapshot) { setPkg(s, "lustre-client-utils", "rc ", "2.15.6-1fsx1") },
			want:       [5]st{P, F, F, P, P},
			wantDrifts: []string{"lustre-client-utils: 2.15.6-1fsx1 → (absent)", "lustre-client-utils: held → not held"},
		},
		{
			name:       "guarded package left half-configured",
			mutate:     func(s *Snapshot) { setPkg(s, "nvidia-dkms-595-open", "hF ", "595.91.07-0ubuntu0.24.04.1") },
			want:       [5]st{P, P, F, P, P},
			wantDrifts: []string{`nvidia-dkms-595-open: installed (hi) → dpkg status "hF "`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base, _ := held(t)
			cur := clone(t, base)
			tt.mutate(&cur)
			g := Union(Guarded(base, settings.GuardPolicy{}), Guarded(cur, settings.GuardPolicy{}))
			checks := Judge(base, cur, g, `layer "slurm"`, tt.opt)
			if len(checks) != 5 {
				t.Fatalf("got %d checks", len(checks))
			}
			for i, c := range checks {
				if c.ID != CheckIDs[i] {
					t.Errorf("check %d id %q, want %q", i, c.ID, CheckIDs[i])
				}
				if c.Status != tt.want[i] {
					t.Errorf("%s: status %s, want %s; message %q", c.ID, c.Status, tt.want[i], c.Message)
				}
				if !strings.HasPrefix(c.Message, `after layer "slurm": `) {
					t.Errorf("%s: message %q does not name the stage", c.ID, c.Message)
				}
				if c.Expected == "" || c.Actual == "" {
					t.Errorf("%s: empty expected/actual %+v", c.ID, c)
				}
			}
			var got []string
			for _, d := range Diff(base, cur, g) {
				got = append(got, d.String())
			}
			if !reflect.DeepEqual(got, tt.wantDrifts) {
				t.Errorf("drifts:\n got %q\nwant %q", got, tt.wantDrifts)
			}
			for _, d := range got {
				for _, c := range checks {
					if !strings.Contains(c.Evidence, d) {
						t.Errorf("%s evidence lacks drift %q", c.ID, d)
					}
				}
			}
		})
	}
}

func TestHoldLiftedOnUnguardedPackage(t *testing.T) {
	base, g := held(t)
	setPkg(&base, "adduser", "hi ", "3.137ubuntu1")
	cur := clone(t, base)
	setPkg(&cur, "adduser", "ii ", "3.137ubuntu1")
	c := Judge(base, cur, g, "validation", Options{})
	if c[1].Status != result.Fail || c[1].Message != "after validation: adduser: held → not held" {
		t.Errorf("holds: %+v", c[1])
	}
	for _, i := range []int{0, 2, 3, 4} {
		if c[i].Status != result.Pass {
			t.Errorf("%s: %s %q", c[i].ID, c[i].Status, c[i].Message)
		}
	}
}

func TestJudgeFailureMessagesListDrift(t *testing.T) {
	base, g := held(t)
	cur := clone(t, base)
	setPkg(&cur, "linux-image-"+k14, "ii ", "7.0.0-1014.14")
	c := Judge(base, cur, g, `layer "slurm"`, Options{})[1]
	want := `after layer "slurm": linux-image-7.0.0-1014-aws: held → not held`
	if c.Message != want {
		t.Errorf("message %q, want %q", c.Message, want)
	}
}

func TestDecodeSnapshotRejects(t *testing.T) {
	good, err := baseline(t).Encode()
	if err != nil {
		t.Fatal(err)
	}
	for name, in := range map[string]string{
		"truncated":     string(good[:len(good)/2]),
		"other schema":  strings.Replace(string(good), `"schema": 1`, `"schema": 2`, 1),
		"unknown field": strings.Replace(string(good), `"schema": 1`, `"schema": 1, "extra": true`, 1),
		"empty":         `{"schema": 1}`,
	} {
		if _, err := DecodeSnapshot([]byte(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func BenchmarkJudge(b *testing.B) {
	base := baseline(b)
	g := Guarded(base, settings.GuardPolicy{})
	for b.Loop() {
		Judge(base, base, g, "bench", Options{})
	}
}
