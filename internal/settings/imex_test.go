package settings

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestIMEXValidate(t *testing.T) {
	for _, m := range []IMEX{IMEXUnset, IMEXHost, IMEXDRA, IMEXOff} {
		if err := m.Validate("imex"); err != nil {
			t.Errorf("%q refused: %v", m, err)
		}
	}
	for _, m := range []IMEX{"Host", "on", "true", " host", "slurm"} {
		err := m.Validate("imex")
		if err == nil {
			t.Errorf("%q accepted", m)
			continue
		}
		for _, want := range []string{`imex = "` + string(m) + `"`, `"host"`, `"dra"`, `"off"`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q: %v does not say %s", m, err, want)
			}
		}
	}
	if err := IMEX("x").Validate("node_check.imex"); err == nil || !strings.HasPrefix(err.Error(), "node_check.imex = ") {
		t.Errorf("prefix not named: %v", err)
	}
}

func TestIMEXResolved(t *testing.T) {
	for _, tc := range []struct {
		m    IMEX
		mnnv bool
		want IMEX
	}{
		{IMEXUnset, true, IMEXHost},
		{IMEXUnset, false, IMEXOff},
		{IMEXDRA, true, IMEXDRA},
		{IMEXOff, true, IMEXOff},
		{IMEXHost, false, IMEXHost},
		{IMEXDRA, false, IMEXDRA},
	} {
		if got := tc.m.Resolved(tc.mnnv); got != tc.want {
			t.Errorf("%q.Resolved(%v) = %q, want %q", tc.m, tc.mnnv, got, tc.want)
		}
	}
}

// The bill of materials carries imex as written: unset stays unset (omitted), so a later
// verification resolves it for its own instance type.
func TestIMEXRecorded(t *testing.T) {
	for _, m := range []IMEX{IMEXUnset, IMEXHost, IMEXDRA, IMEXOff} {
		b, err := json.Marshal(Checks{IMEX: m})
		if err != nil {
			t.Fatal(err)
		}
		if m == IMEXUnset && strings.Contains(string(b), `"imex"`) {
			t.Errorf("unset recorded: %s", b)
		}
		var back Checks
		if err := json.Unmarshal(b, &back); err != nil || back.IMEX != m {
			t.Errorf("%q: %s back as %q (%v)", m, b, back.IMEX, err)
		}
	}
}
