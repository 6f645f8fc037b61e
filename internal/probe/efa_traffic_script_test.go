package probe

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

// fakePingpong stands in for fabtests' fi_pingpong in these script tests only (the simulated
// host's stand-in is the one the end-to-end tests run): the server listens on its port after
// the delay $FAKE_PP/late.<domain> names (none: at once), then waits for its client; a client
// with no listening server fails as pingpong.c does ("failed to connect: Connection refused",
// exit 111); both print the real table of testdata/pingpong-efa_test-aws-cdi-sdk.txt.
const fakePingpong = `#!/bin/sh
dom="" sport="" dport=""
while [ $# -gt 0 ]; do
	case $1 in -d) dom=$2; shift ;; -B) sport=$2; shift ;; -P) dport=$2; shift ;; -p|-e|-I|-S) shift ;; esac
	shift
done
if [ -n "$sport" ]; then
	[ -f "$FAKE_PP/late.$dom" ] && sleep "$(cat "$FAKE_PP/late.$dom")"
	: >"$FAKE_PP/listen.$sport"
	while [ ! -f "$FAKE_PP/client.$sport" ]; do sleep 0.05; done
else
	if [ ! -f "$FAKE_PP/listen.$dport" ]; then
		echo "[error] util/pingpong.c:370 : failed to connect: Connection refused" >&2
		exit 111
	fi
	: >"$FAKE_PP/client.$dport"
fi
cat "$FAKE_PP/table"
`

func runTrafficScript(t *testing.T, devices []string, late map[string]string, bound time.Duration) string {
	t.Helper()
	dir := t.TempDir()
	pp := filepath.Join(dir, "fi_pingpong")
	if err := os.WriteFile(pp, []byte(fakePingpong), 0o755); err != nil {
		t.Fatal(err)
	}
	table, err := os.ReadFile(filepath.Join("testdata", "pingpong-efa_test-aws-cdi-sdk.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "table"), table, 0o644); err != nil {
		t.Fatal(err)
	}
	for d, s := range late {
		if err := os.WriteFile(filepath.Join(dir, "late."+d+"-rdm"), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	text := efaTrafficText(devices, settings.EFATraffic{Timeout: bound, Concurrency: len(devices)}, pp)
	cmd := exec.Command("/bin/sh", "-c", text)
	cmd.Env = append(os.Environ(), "FAKE_PP="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return string(out)
}

// The client of a pair can come before its server listens: the script tries the refused
// connect again within the pair's bound, and the pair passes once the server is up. A server
// that never listens leaves the connect refused to the end: that device fails, named, as a
// refused connect (not a hang), and the others still pass.
func TestEFATrafficScriptClientBeforeServer(t *testing.T) {
	devs := []string{"rdmap79s0", "rdmap80s0"}
	tests := []struct {
		name   string
		late   map[string]string
		ok     []string
		failed map[string]string
	}{
		{name: "servers listen at once", ok: devs},
		{name: "one server listens 1.5 s late", late: map[string]string{"rdmap80s0": "1.5"}, ok: devs},
		{name: "one server never listens within the bound", late: map[string]string{"rdmap80s0": "30"}, ok: devs[:1],
			failed: map[string]string{"rdmap80s0": "rdmap80s0: the client's connect was refused on all"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			out := runTrafficScript(t, devs, tc.late, 4*time.Second)
			if took := time.Since(start); took > 15*time.Second {
				t.Errorf("the script ran %s, past the pairs' bound", took)
			}
			res, err := ParseEFATraffic(out)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if len(res) != len(devs) {
				t.Fatalf("%d results\n%s", len(res), out)
			}
			for _, f := range res {
				name := f.Value.Device
				if f.OK() {
					if len(f.Value.Client) == 0 {
						t.Errorf("%s: no table", name)
					}
					continue
				}
				name = strings.SplitN(f.Problem, ":", 2)[0]
				want, bad := tc.failed[name]
				if !bad || !strings.Contains(f.Problem, want) {
					t.Errorf("%s failed: %s\n%s", name, f.Problem, f.Evidence)
				}
				if strings.Contains(f.Problem, "hung") || strings.Contains(f.Problem, "on all 1 tries") {
					t.Errorf("%s: %s (a persistently refused connect, tried more than once, is not a hang)", name, f.Problem)
				}
			}
			if passed := len(res) - len(tc.failed); passed != len(tc.ok) {
				t.Errorf("%d passed, want %d\n%s", passed, len(tc.ok), out)
			}
		})
	}
}
