package probe

import (
	"cmp"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/guard"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
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
	secs, err := bundle.Parse(string(b), snapshotCommands())
	if err != nil {
		t.Fatal(err)
	}
	return secs
}

func TestParseSnapshotDLAMI(t *testing.T) {
	s, err := ParseSnapshot(sections(t))
	if err != nil {
		t.Fatal(err)
	}
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
	want := map[string]facts.SnapshotModule{"nvidia": {Present: true, Version: "595.91.07"}, "efa": {Present: true, Version: "3.3.0"}, "gdrdrv": {Present: true, Version: "2.5.2"}, "lustre": {Present: true, Version: "2.15.6"}}
	if !reflect.DeepEqual(s.ModuleVersions, want) {
		t.Errorf("modules %v", s.ModuleVersions)
	}
	if !s.TakenAt.IsZero() {
		t.Errorf("TakenAt %v: the caller sets it", s.TakenAt)
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
			var se *facts.SnapshotSectionError
			if !errors.As(err, &se) || se.Section != tt.section {
				t.Fatalf("error %v is not a facts.SnapshotSectionError for %s", err, tt.section)
			}
			for _, c := range guard.Unjudgeable(`layer "slurm"`, err) {
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
	if s.ModuleVersions["lustre"] != (facts.SnapshotModule{}) || s.ModuleVersions["gdrdrv"] != (facts.SnapshotModule{Present: true}) {
		t.Errorf("modules: %+v", s.ModuleVersions)
	}
}

func TestCommands(t *testing.T) {
	cmds := snapshotCommands()
	for i := range cmds {
		cmds[i].Timeout = cmp.Or(cmds[i].Timeout, settings.DefaultCheckTimeout) // as query bounds them
	}
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
	if c := snapshotCommands()[len(snapshotCommands())-1]; c.Tool == nil || c.Tool.Paths[0] != "/usr/sbin/modinfo" {
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
		for _, c := range snapshotCommands() {
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
			var se *facts.SnapshotSectionError
			if !errors.As(err, &se) {
				t.Fatalf("error %v is not a facts.SnapshotSectionError", err)
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
		back, err := guard.DecodeSnapshot(b)
		if err != nil {
			t.Fatalf("snapshot does not survive the baseline file: %v", err)
		}
		checks := guard.Judge(back, s, guard.Guarded(s, settings.GuardPolicy{}), "fuzz", guard.Options{})
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

// The guard's tests judge the snapshot this fixture parses to, kept beside them as JSON: it
// must stay what the parser makes of the fixture.
func TestGuardSnapshotFixtureIsTheParse(t *testing.T) {
	s, err := ParseSnapshot(sections(t))
	if err != nil {
		t.Fatal(err)
	}
	want, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../guard/testdata/dlami-snapshot.json")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("internal/guard/testdata/dlami-snapshot.json is not the parse of testdata/dlami-bundle.txt; regenerate it from ParseSnapshot")
	}
}
