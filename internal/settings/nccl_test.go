package settings

import (
	"strings"
	"testing"
	"time"
)

func TestNCCLRejectsBadSettings(t *testing.T) {
	tests := []struct {
		name  string
		o     NCCL
		field string
	}{
		{"cuda version with shell", NCCL{CUDAVersion: "13.2; rm -rf /"}, "nccl.cuda_version"},
		{"cuda version three parts", NCCL{CUDAVersion: "13.2.1"}, "nccl.cuda_version"},
		{"negative ranks", NCCL{Ranks: -1}, "nccl.ranks"},
		{"too many ranks", NCCL{Ranks: 100000}, "nccl.ranks"},
		{"negative timeout", NCCL{Timeout: -5 * time.Second}, "nccl.timeout"},
		{"env key with space", NCCL{Env: map[string]string{"A B": "1"}}, "nccl.env key"},
		{"env key with digit first", NCCL{Env: map[string]string{"1A": "1"}}, "nccl.env key"},
		{"env key injection", NCCL{Env: map[string]string{"A=1 -x B": "1"}}, "nccl.env key"},
		{"env overrides NCCL_DEBUG", NCCL{Env: map[string]string{"NCCL_DEBUG": "WARN"}}, "NCCL_DEBUG"},
		{"env overrides LD_LIBRARY_PATH", NCCL{Env: map[string]string{"LD_LIBRARY_PATH": "/tmp"}}, "LD_LIBRARY_PATH"},
		{"env value with newline", NCCL{Env: map[string]string{"A": "1\nB"}}, `nccl.env["A"]`},
		{"env hides the INFO lines in a file", NCCL{Env: map[string]string{"NCCL_DEBUG_FILE": "/tmp/nccl.%h.%p"}}, "nccl.env key NCCL_DEBUG_FILE"},
		{"env narrows the INFO lines", NCCL{Env: map[string]string{"NCCL_DEBUG_SUBSYS": "INIT"}}, "nccl.env key NCCL_DEBUG_SUBSYS"},
		{"arg with NUL", NCCL{Args: []string{"-b", "8\x00"}}, "nccl.args[1]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := tc.o.Resolved()
			if err == nil {
				t.Fatalf("no error; resolved:\n%+v", n)
			}
			if !strings.Contains(err.Error(), tc.field) || !strings.HasPrefix(err.Error(), "nccl.") {
				t.Errorf("error %q does not name %q", err, tc.field)
			}
		})
	}
}

func TestNCCLWarnings(t *testing.T) {
	if w := (NCCL{}).Warnings(); len(w) != 0 {
		t.Errorf("defaults warn: %q", w)
	}
	w := NCCL{Env: map[string]string{"NCCL_NET": " IB "}, Args: []string{"-c", "0"}}.Warnings()
	if len(w) != 2 || !strings.Contains(w[0], "NCCL_NET=IB") || !strings.Contains(w[1], "-c 0") {
		t.Errorf("warnings = %q", w)
	}
	if w := (NCCL{Env: map[string]string{"NCCL_NET": "AWS Libfabric"}}).Warnings(); len(w) != 0 {
		t.Errorf("Libfabric warns: %q", w)
	}
}
