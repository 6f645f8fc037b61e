package probe

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The bundle commands kept in commands/*.sh run with their values set before the body and print
// what the parsers read: each runs here with /bin/sh against files in a temporary folder.
func TestCommandFilesRun(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	spec := write("spec.json", `{"process": {"rlimits": []}}`)
	withSpec := write("with-spec.toml", "version = 2\n  base_runtime_spec = \""+spec+"\"\n")
	noSpec := write("no-spec.toml", "version = 2\n")
	write("a.conf", "* soft memlock unlimited\n")
	write("b.conf", "* hard memlock unlimited\n")
	containerd := func(config string) string {
		return commandShell("containerd-spec.sh", scriptVar{name: "config", value: config}, scriptVar{name: "absent_word", value: absentWord},
			scriptVar{name: "spec_word", value: specWord}, scriptVar{name: "no_spec_word", value: noSpecWord})
	}
	for _, tc := range []struct {
		name, shell, want string
	}{
		{"containerd without a config", containerd(filepath.Join(dir, "none.toml")), absentWord + "\n"},
		{"containerd config naming no spec", containerd(noSpec), noSpecWord + "\n"},
		{"containerd config naming a spec", containerd(withSpec), specWord + " " + spec + "\n" + `{"process": {"rlimits": []}}`},
		{"limits files", commandShell("dump-files.sh", scriptVar{name: "globs", value: dir + "/*.conf " + dir + "/missing/*"}),
			"==> " + dir + "/a.conf\n| * soft memlock unlimited\n==> " + dir + "/b.conf\n| * hard memlock unlimited\n"},
		{"a quoted login user", commandShell("login-user.sh", scriptVar{name: "user", value: "no such user 'x'"}), "no such user 'x'\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _ := exec.Command("/bin/sh", "-c", tc.shell).Output()
			if string(out) != tc.want {
				t.Errorf("printed %q, want %q\nshell:\n%s", out, tc.want, tc.shell)
			}
		})
	}
	// The header comment stays home: only the values and the body travel.
	if sh := commandShell("pci.sh"); strings.HasPrefix(sh, "#") || !strings.HasPrefix(sh, "for d in /sys/bus/pci/devices/*") {
		t.Errorf("pci command starts %q", sh[:40])
	}
}
