package imexctl

import (
	"fmt"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// ChannelDir is where the driver's IMEX channels appear as character devices
// (/dev/nvidia-caps-imex-channels/channelN, NVIDIA's IMEX guide, imexchannels.html).
const ChannelDir = "/dev/nvidia-caps-imex-channels"

// ParseChannelList reads `ls -1 /dev/nvidia-caps-imex-channels`: one channelN per line (an
// empty directory prints nothing). Any other line is an error: the listing is not what the
// command prints, so it proves nothing.
func ParseChannelList(out string) ([]string, error) {
	var channels []string
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		n, ok := strings.CutPrefix(l, "channel")
		if !ok || n == "" || strings.Trim(n, "0123456789") != "" {
			return nil, fmt.Errorf("ls %s: unexpected line %q", ChannelDir, textcut.Head(l, 120))
		}
		channels = append(channels, l)
	}
	return channels, nil
}
