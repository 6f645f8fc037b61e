package imexctl

import (
	"slices"
	"strings"
	"testing"
)

func TestParseChannelList(t *testing.T) {
	for _, c := range []struct {
		name, out string
		want      []string
		err       string
	}{
		{"channel 0", "channel0\n", []string{"channel0"}, ""},
		{"several", "channel0\nchannel1\nchannel12\n", []string{"channel0", "channel1", "channel12"}, ""},
		{"empty directory", "", nil, ""},
		{"an error line", "ls: cannot open directory '/dev/nvidia-caps-imex-channels': Permission denied\n", nil, "unexpected line"},
		{"not a channel", "channel\n", nil, "unexpected line"},
		{"a suffix", "channel0x\n", nil, "unexpected line"},
	} {
		got, err := ParseChannelList(c.out)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%s: %q %v, want %q", c.name, got, err, c.want)
		}
	}
}

func FuzzParseChannelList(f *testing.F) {
	for _, s := range []string{"channel0\n", "", "channel0\nchannel1", "ls: x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, out string) {
		got, err := ParseChannelList(out)
		if err != nil {
			return
		}
		for _, c := range got {
			if !strings.HasPrefix(c, "channel") || len(c) == len("channel") {
				t.Fatalf("%q read as channel %q", out, c)
			}
		}
	})
}
