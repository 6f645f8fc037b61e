package facts

import (
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/dpkg"
)

// The bill of materials records the installed IMEX package (nvidia-imex from driver 590, the
// branch's nvidia-imex-<major> before); a removed one and an unread list record nothing.
func TestIMEXPackageVersion(t *testing.T) {
	for _, c := range []struct {
		name string
		pkgs Fact[[]dpkg.Package]
		want string
		ok   bool
	}{
		{"590+", Read([]dpkg.Package{{Name: "nvidia-imex", Version: "595.91.07-1", Installed: true}}, ""), "595.91.07-1", true},
		{"branch package", Read([]dpkg.Package{{Name: "nvidia-imex-570", Version: "570.172.08-1", Installed: true}}, ""), "570.172.08-1", true},
		{"removed, config left", Read([]dpkg.Package{{Name: "nvidia-imex", Version: "595.91.07-1", Status: "rc "}}, ""), "", false},
		{"another package", Read([]dpkg.Package{{Name: "nvidia-imexx", Version: "1", Installed: true}}, ""), "", false},
		{"none", Read([]dpkg.Package(nil), ""), "", false},
		{"unread", Unread[[]dpkg.Package]("dpkg-query exited 2", ""), "", false},
	} {
		got, ok := IMEX{Packages: c.pkgs}.PackageVersion()
		if got != c.want || ok != c.ok {
			t.Errorf("%s: %q %v, want %q %v", c.name, got, ok, c.want, c.ok)
		}
	}
}
