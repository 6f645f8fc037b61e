package checks

import "testing"

func TestModelMatches(t *testing.T) {
	tests := []struct {
		name, model string
		want        bool
	}{
		{"NVIDIA B200", "B200", true},
		{"NVIDIA B200", "b200", true},
		{"NVIDIA H100 80GB HBM3", "H100", true},
		{"NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB", true},
		{"NVIDIA A100-SXM4-80GB", "A100-SXM4-40GB", false},
		{"NVIDIA L40S", "L4", false},
		{"NVIDIA L4", "L4", true},
		{"NVIDIA L4-12Q", "L4", true},
		{"NVIDIA L40S", "L40S", true},
		{"NVIDIA H200", "H100", false},
		{"NVIDIA GB200", "B200", false},
		{"NVIDIA B300 SXM6 AC", "B300", true},
		{"anything", "", true},
	}
	for _, tt := range tests {
		if got := modelMatches(tt.name, tt.model); got != tt.want {
			t.Errorf("modelMatches(%q, %q) = %v", tt.name, tt.model, got)
		}
	}
}
