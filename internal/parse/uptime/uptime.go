// Package uptime parses /proc/uptime: how long the host has been up since its kernel booted.
//
// proc(5) (man7.org/linux/man-pages/man5/proc_uptime.5.html): "This file contains two numbers
// (values in seconds): the uptime of the system (including time spent in suspend) and the
// amount of time spent in the idle process." The kernel prints each as "%lu.%02lu"
// (fs/proc/uptime.c), one line: "350735.47 234388.90".
package uptime

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// maxQuoted bounds how much of the host's text an error quotes.
const maxQuoted = 80

// maxUptime bounds what is believed: a century. A larger number is not an uptime.
const maxUptime = 100 * 365 * 24 * time.Hour

// Parse returns the first number of /proc/uptime's text: the time since boot.
func Parse(text string) (time.Duration, error) {
	fields := strings.Fields(text)
	if len(fields) != 2 {
		return 0, fmt.Errorf("/proc/uptime: want two numbers (uptime and idle seconds), got %q", textcut.Head(text, maxQuoted))
	}
	secs, err := strconv.ParseFloat(fields[0], 64)
	if err != nil || math.IsNaN(secs) || math.IsInf(secs, 0) || secs < 0 || strings.ContainsAny(fields[0], "eEpPxX_+-") {
		return 0, fmt.Errorf("/proc/uptime: the uptime %q is not a number of seconds", textcut.Head(fields[0], maxQuoted))
	}
	if secs > maxUptime.Seconds() {
		return 0, fmt.Errorf("/proc/uptime: an uptime of %s seconds is not believable", textcut.Head(fields[0], maxQuoted))
	}
	return time.Duration(math.Round(secs * float64(time.Second))), nil
}
