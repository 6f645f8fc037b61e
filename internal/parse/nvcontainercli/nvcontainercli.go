// Package nvcontainercli parses `nvidia-container-cli info`: libnvidia-container's own view of
// the driver and the GPUs (info.c: "NVRM version:", "CUDA version:", then one block per GPU
// with "Device Index:", "Device Minor:", "Model:", "Brand:", "GPU UUID:", "Bus Location:",
// "Architecture:"). It is what the toolkit's prestart hook sees when it sets up a container,
// so a GPU missing here is a GPU no container gets.
package nvcontainercli

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Info is what `nvidia-container-cli info` reports.
type Info struct {
	// NVRMVersion is the kernel driver's version, CUDAVersion the CUDA driver API version.
	NVRMVersion string
	CUDAVersion string
	// Devices are the GPUs, in the order printed (by index).
	Devices []Device
}

// Device is one GPU's block.
type Device struct {
	Index        int
	Minor        int
	Model        string
	Brand        string
	UUID         string
	BusLocation  string
	Architecture string
}

// UUIDs lists the devices' UUIDs in order.
func (i Info) UUIDs() []string {
	out := make([]string, len(i.Devices))
	for n, d := range i.Devices {
		out[n] = d.UUID
	}
	return out
}

// debugLine is a glog line of `-k -d /dev/tty` ("I1023 02:24:09.500303 5247 nvc_info.c:561] ..."):
// the debug output interleaves with the report on the same terminal.
var debugLine = regexp.MustCompile(`^[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d+ +\d+ [^ ]+:\d+\] `)

// errorPrefix starts the tool's own error line ("nvidia-container-cli: initialization error:
// nvml error: driver not loaded").
const errorPrefix = "nvidia-container-cli: "

// nullValue is what info.c prints for a field the library could not read (a Jetson without
// NVML): never a value.
const nullValue = "(null)"

// ParseInfo reads the report. It fails on the tool's own error line (its message is the
// error), on a report without a driver version, on a GPU block without a readable index or
// UUID, on a UUID listed twice, and on a line it cannot read; a report with no GPU block is a
// host where the library sees no GPU (zero devices, no error).
func ParseInfo(text string) (Info, error) {
	var info Info
	var cur *Device
	seenUUID := map[string]bool{}
	finish := func() error {
		if cur == nil {
			return nil
		}
		d := *cur
		cur = nil
		switch {
		case d.UUID == "":
			return fmt.Errorf("nvidia-container-cli info: device %d has no readable GPU UUID", d.Index)
		case seenUUID[d.UUID]:
			return fmt.Errorf("nvidia-container-cli info: GPU UUID %s listed twice", d.UUID)
		}
		seenUUID[d.UUID] = true
		info.Devices = append(info.Devices, d)
		return nil
	}
	for n, raw := range strings.Split(text, "\n") {
		line := strings.TrimRight(raw, " \t\r")
		switch {
		case strings.TrimSpace(line) == "", debugLine.MatchString(line), strings.HasPrefix(line, "-- WARNING"):
			continue
		case strings.HasPrefix(line, errorPrefix):
			return Info{}, fmt.Errorf("nvidia-container-cli info: %s", strings.TrimPrefix(line, errorPrefix))
		}
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			return Info{}, fmt.Errorf("nvidia-container-cli info: line %d: not a \"key: value\" line: %q", n+1, line)
		}
		value = strings.TrimSpace(value)
		if value == nullValue {
			value = ""
		}
		switch key {
		case "NVRM version":
			info.NVRMVersion = value
		case "CUDA version":
			info.CUDAVersion = value
		case "Device Index":
			if err := finish(); err != nil {
				return Info{}, err
			}
			idx, err := strconv.Atoi(value)
			if err != nil || idx < 0 {
				return Info{}, fmt.Errorf("nvidia-container-cli info: line %d: device index %q is not a number", n+1, value)
			}
			cur = &Device{Index: idx, Minor: -1}
		default:
			if cur == nil {
				// A field before the first device block that this parser does not know: newer
				// libraries may add some; only the driver version is required.
				continue
			}
			switch key {
			case "Device Minor":
				m, err := strconv.Atoi(value)
				if err != nil {
					return Info{}, fmt.Errorf("nvidia-container-cli info: line %d: device minor %q is not a number", n+1, value)
				}
				cur.Minor = m
			case "Model":
				cur.Model = value
			case "Brand":
				cur.Brand = value
			case "GPU UUID":
				cur.UUID = value
			case "Bus Location":
				cur.BusLocation = value
			case "Architecture":
				cur.Architecture = value
			}
		}
	}
	if err := finish(); err != nil {
		return Info{}, err
	}
	if info.NVRMVersion == "" {
		return Info{}, fmt.Errorf("nvidia-container-cli info: no readable \"NVRM version:\" line (the library could not read the driver)")
	}
	return info, nil
}
