package guard

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/dkms"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

const (
	k14 = "7.0.0-1014-aws"
	k15 = "7.0.0-1015-aws"
)

func sections(t testing.TB) map[string]bundle.Section {
	t.Helper()
	b, err := os.ReadFile("testdata/dlami-bundle.txt")
	if err != nil {
		t.Fatal(err)
	}
	secs, err := bundle.Parse(string(b), Commands())
	if err != nil {
		t.Fatal(err)
	}
	return secs
}

func baseline(t testing.TB) Snapshot {
	t.Helper()
	s, err := ParseSnapshot(sections(t))
	if err != nil {
		t.Fatalf("ParseSnapshot: %v", err)
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
	g := Guarded(s, Policy{})
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

func TestParseSnapshotDLAMI(t *testing.T) {
	s := baseline(t)
	if s.RunningKernel != k14 || s.NextBootKernel != k14 || s.NextBootSource != "grub.cfg first entry" {
		t.Errorf("kernel %q next %q (%s)", s.RunningKernel, s.NextBootKernel, s.NextBootSource)
	}
	if !reflect.DeepEqual(s.InstalledKernelImages, []string{k14}) {
		t.Errorf("images %v", s.InstalledKernelImages)
	}
	if p := s.Packages["linux-image-"+k14]; !p.Held || !p.Installed || p.Version != "7.0.0-1014.14" {
		t.Errorf("linux-image: %+v", p)
	}
	if p := s.Packages["libc6:i386"]; p.Arch != "i386" || !p.Installed {
		t.Errorf("multiarch duplicate: %+v", p)
	}
	if !s.DKMSAvailable || len(s.DKMS) != 4 || len(s.DKMSWarnings) != 1 {
		t.Errorf("dkms: %v %d %d", s.DKMSAvailable, len(s.DKMS), len(s.DKMSWarnings))
	}
	want := map[string]Module{"nvidia": {true, "595.91.07"}, "efa": {true, "3.3.0"}, "gdrdrv": {true, "2.5.2"}, "lustre": {true, "2.15.6"}}
	if !reflect.DeepEqual(s.ModuleVersions, want) {
		t.Errorf("modules %v", s.ModuleVersions)
	}
	if !s.TakenAt.IsZero() {
		t.Errorf("TakenAt %v: the caller sets it", s.TakenAt)
	}
}

func TestGuardedDefaults(t *testing.T) {
	s := baseline(t)
	got := Guarded(s, Policy{})
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
	p := Policy{Include: []string{"efa-config", "libfabric-aws*", "not-on-host"}, Exclude: []string{"lustre-*", "gdrcopy"}}
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
	if err := (Policy{Include: []string{"linux-[aws"}}).Validate(); err == nil {
		t.Error("Validate accepted a malformed pattern")
	}
}

func TestUnheldOnRawDLAMI(t *testing.T) {
	s := baseline(t)
	g := Union(Guarded(s, Policy{}), []string{"not-on-host"})
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
	c := Judge(s, s, Guarded(s, Policy{}), "baseline", Options{})
	if c[1].ID != result.Holds || c[1].Status != result.Warn || !strings.Contains(c[1].Message, "10 guarded packages are not on hold (efa, ") ||
		!strings.Contains(c[1].Message, "hold_unheld = true") || !strings.Contains(c[1].Message, "require_holds = true") {
		t.Errorf("holds on a partly held DLAMI: %s %q", c[1].Status, c[1].Message)
	}
	c = Judge(s, s, Guarded(s, Policy{}), "baseline", Options{RequireHolds: true})
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
	g := toSet(Guarded(s, Policy{}))
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
	if !toSet(Guarded(s, Policy{Include: []string{"nvidia-container-toolkit*"}}))["nvidia-container-toolkit"] {
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
			mutate:     func(s *Snapshot) { s.ModuleVersions["nvidia"] = Module{true, "595.100.01"} },
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
			g := Union(Guarded(base, Policy{}), Guarded(cur, Policy{}))
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

func TestNextBootRules(t *testing.T) {
	tests := []struct {
		name               string
		grubenv, grubcfg   string
		images             string
		wantKernel, source string
	}{
		{"ubuntu default 0", "", "set default=\"${next_entry}\"\nset default=\"0\"\nlinux /boot/vmlinuz-" + k14 + " ro", "/boot/vmlinuz-" + k14 + "\n/boot/vmlinuz-" + k15, k14, "grub.cfg first entry"},
		{"GRUB_DEFAULT=saved, advanced id", "saved_entry=gnulinux-advanced-1234>gnulinux-" + k15 + "-advanced-5a2b-1c3d", "set default=\"${next_entry}\"\nset default=\"${saved_entry}\"\nlinux /boot/vmlinuz-" + k14, "/boot/vmlinuz-" + k14, k15, "grubenv saved_entry"},
		{"GRUB_DEFAULT=saved, title", "saved_entry=Advanced options for Ubuntu>Ubuntu, with Linux " + k15 + " (recovery mode)", "set default=\"${saved_entry}\"\nlinux /boot/vmlinuz-" + k14, "", k15, "grubenv saved_entry"},
		{"saved but empty saved_entry", "", "set default=\"${saved_entry}\"\nlinux /boot/vmlinuz-" + k14, "", k14, "grub.cfg first entry"},
		{"grub-reboot next_entry", "next_entry=gnulinux-" + k15 + "-advanced-abcd", "set default=\"${next_entry}\"\nset default=\"0\"\nlinux /boot/vmlinuz-" + k14, "", k15, "grubenv next_entry"},
		{"no grub.cfg: newest image", absent, absent, "/boot/vmlinuz-6.17.0-1019-aws\n/boot/vmlinuz-" + k15 + "\n/boot/vmlinuz-" + k14 + "\n/boot/vmlinuz-" + k14 + ".dpkg-tmp", k15, "newest /boot/vmlinuz-*"},
		{"unresolvable default", "", "set default=\"1>2\"\nlinux /boot/vmlinuz-" + k14, "/boot/vmlinuz-" + k14, k14, "newest /boot/vmlinuz-* (grub.cfg default \"1>2\" not resolvable)"},
		{"nothing at all", absent, absent, "", "", "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			secs := sections(t)
			secs[sectionGrubEnv] = bundle.Section{Name: sectionGrubEnv, Output: tt.grubenv}
			secs[sectionGrubCfg] = bundle.Section{Name: sectionGrubCfg, Output: tt.grubcfg}
			secs[sectionBootImages] = bundle.Section{Name: sectionBootImages, Output: tt.images}
			s, err := ParseSnapshot(secs)
			if err != nil {
				t.Fatal(err)
			}
			if s.NextBootKernel != tt.wantKernel || !strings.HasPrefix(s.NextBootSource, tt.source) {
				t.Errorf("got %q (%s), want %q (%s...)", s.NextBootKernel, s.NextBootSource, tt.wantKernel, tt.source)
			}
		})
	}
}

func TestParseSnapshotErrors(t *testing.T) {
	tests := []struct {
		name    string
		section string
		sec     *bundle.Section // nil: delete the section
		want    string
	}{
		{"no dpkg output", sectionPackages, nil, "guard.dpkg"},
		{"dpkg-query missing", sectionPackages, &bundle.Section{Output: "sh: 1: dpkg-query: not found", ExitCode: 127}, "exit 127"},
		{"dpkg garbage", sectionPackages, &bundle.Section{Output: "ii  foo 1.0 amd64"}, "tab-separated"},
		{"dpkg empty", sectionPackages, &bundle.Section{Output: ""}, "no packages"},
		{"dkms timed out", sectionDKMS, &bundle.Section{Output: "", ExitCode: 124, TimedOut: true}, "timed out"},
		{"dkms garbage", sectionDKMS, &bundle.Section{Output: "what is this"}, "guard.dkms"},
		{"uname empty", sectionRunning, &bundle.Section{Output: "\n"}, "uname"},
		{"modinfo other failure", sectionModinfoPrefix + "efa", &bundle.Section{Output: "modinfo: ERROR: could not get modinfo from 'efa': Exec format error", ExitCode: 1}, "guard.modinfo.efa"},
		{"modinfo two lines", sectionModinfoPrefix + "efa", &bundle.Section{Output: "3.3.0\n3.2.0"}, "more than one line"},
		{"grubcfg unreadable", sectionGrubCfg, &bundle.Section{Output: "awk: cannot open /boot/grub/grub.cfg", ExitCode: 2}, "guard.grubcfg"},
		{"grubenv junk", sectionGrubEnv, &bundle.Section{Output: "foo=bar"}, "unexpected line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			secs := sections(t)
			if tt.sec == nil {
				delete(secs, tt.section)
			} else {
				tt.sec.Name = tt.section
				secs[tt.section] = *tt.sec
			}
			_, err := ParseSnapshot(secs)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
			var se *SectionError
			if !errors.As(err, &se) || se.Section != tt.section {
				t.Fatalf("error %v is not a SectionError for %s", err, tt.section)
			}
			for _, c := range Unjudgeable(`layer "slurm"`, err) {
				if c.Status != result.Fail || !strings.Contains(c.Evidence, se.Output) || !strings.Contains(c.Message, `after layer "slurm"`) {
					t.Errorf("Unjudgeable: %+v", c)
				}
			}
		})
	}
}

func TestParseSnapshotAbsentThings(t *testing.T) {
	secs := sections(t)
	secs[sectionDKMS] = bundle.Section{Name: sectionDKMS, Output: absent}
	secs[sectionModinfoPrefix+"lustre"] = bundle.Section{Name: sectionModinfoPrefix + "lustre", Output: "modinfo: ERROR: Module lustre not found.", ExitCode: 1}
	secs[sectionModinfoPrefix+"gdrdrv"] = bundle.Section{Name: sectionModinfoPrefix + "gdrdrv", Output: ""}
	s, err := ParseSnapshot(secs)
	if err != nil {
		t.Fatal(err)
	}
	if s.DKMSAvailable || len(s.DKMS) != 0 {
		t.Errorf("dkms: %v %v", s.DKMSAvailable, s.DKMS)
	}
	if s.ModuleVersions["lustre"] != (Module{}) || s.ModuleVersions["gdrdrv"] != (Module{Present: true}) {
		t.Errorf("modules: %+v", s.ModuleVersions)
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

func TestCommands(t *testing.T) {
	cmds := Commands()
	if _, err := bundle.Script(cmds); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, c := range cmds {
		names[c.Name] = c.Shell
		if strings.Contains(c.Shell, "sudo") {
			t.Errorf("%s needs no root but uses sudo", c.Name)
		}
	}
	for _, n := range []string{sectionRunning, sectionGrubEnv, sectionGrubCfg, sectionBootImages, sectionPackages, sectionDKMS,
		sectionModinfoPrefix + "nvidia", sectionModinfoPrefix + "efa", sectionModinfoPrefix + "gdrdrv", sectionModinfoPrefix + "lustre"} {
		if _, ok := names[n]; !ok {
			t.Errorf("no command %s", n)
		}
	}
	if c := Commands()[len(Commands())-1]; c.Tool == nil || c.Tool.Paths[0] != "/usr/sbin/modinfo" {
		t.Errorf("modinfo tool %+v", c.Tool)
	}
	if names[sectionModinfoPrefix+"lustre"] != `"$1" -F version 'lustre'` {
		t.Errorf("modinfo command %q", names[sectionModinfoPrefix+"lustre"])
	}
}

// FuzzParseSnapshot feeds arbitrary output to every section (bypassing the bundle markers,
// so the mutations land in the guard's own parsing) and the whole snapshot to Judge.
func FuzzParseSnapshot(f *testing.F) {
	secs := sections(f)
	out := func(n string) string { return secs[n].Output }
	f.Add(out(sectionRunning), out(sectionGrubEnv), out(sectionGrubCfg), out(sectionBootImages),
		out(sectionPackages), out(sectionDKMS), out(sectionModinfoPrefix+"nvidia"), 0)
	f.Add("6.8.0-1015-aws", "saved_entry=gnulinux-6.8.0-1015-aws-advanced-ab12", "set default=\"${saved_entry}\"\nlinux /vmlinuz-6.8.0-1015-aws",
		"/boot/vmlinuz-6.8.0-1015-aws.dpkg-tmp", "hi \tlinux-image-6.8.0-1015-aws\t6.8.0-1015.16\tamd64", absent,
		"modinfo: ERROR: Module nvidia not found.", 1)
	f.Fuzz(func(t *testing.T, uname, grubenv, grubcfg, images, pkgs, dkmsOut, modinfo string, modRC int) {
		in := map[string]bundle.Section{}
		for _, c := range Commands() {
			in[c.Name] = secs[c.Name]
		}
		set := func(name, o string, rc int) { in[name] = bundle.Section{Name: name, Output: o, ExitCode: rc} }
		set(sectionRunning, uname, 0)
		set(sectionGrubEnv, grubenv, 0)
		set(sectionGrubCfg, grubcfg, 0)
		set(sectionBootImages, images, 0)
		set(sectionPackages, pkgs, 0)
		set(sectionDKMS, dkmsOut, 0)
		set(sectionModinfoPrefix+"nvidia", modinfo, modRC)
		s, err := ParseSnapshot(in)
		if err != nil {
			var se *SectionError
			if !errors.As(err, &se) {
				t.Fatalf("error %v is not a SectionError", err)
			}
			return
		}
		if s.RunningKernel == "" || len(s.Packages) == 0 {
			t.Fatalf("accepted a snapshot without kernel or packages")
		}
		b, err := s.Encode()
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeSnapshot(b)
		if err != nil {
			t.Fatalf("snapshot does not survive the baseline file: %v", err)
		}
		checks := Judge(back, s, Guarded(s, Policy{}), "fuzz", Options{})
		if len(checks) != 5 {
			t.Fatalf("%d checks", len(checks))
		}
	})
}

func BenchmarkParseSnapshot(b *testing.B) {
	secs := sections(b)
	for b.Loop() {
		if _, err := ParseSnapshot(secs); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkJudge(b *testing.B) {
	base := baseline(b)
	g := Guarded(base, Policy{})
	for b.Loop() {
		Judge(base, base, g, "bench", Options{})
	}
}
