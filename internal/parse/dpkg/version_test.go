package dpkg

import "testing"

func TestUpstream(t *testing.T) {
	for in, want := range map[string]string{
		"570.172.08-1": "570.172.08", "1:580.65.06-1": "580.65.06", "570.172.08-0ubuntu0.24.04.1": "570.172.08", "570.172.08": "570.172.08",
	} {
		if got := Upstream(in); got != want {
			t.Errorf("Upstream(%q) = %q, want %q", in, got, want)
		}
	}
}
