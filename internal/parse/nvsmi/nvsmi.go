// Package nvsmi parses nvidia-smi output into the list of GPUs it reports: the CSV of
// `nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv[,noheader]`
// and, for hand-pasted evidence, the default table.
package nvsmi

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// GPU is one GPU as nvidia-smi reports it.
type GPU struct {
	Index         int
	Name          string
	DriverVersion string
	// BusID is as printed ("00000000:51:00.0"); empty when the query did not ask for it.
	BusID string
}

// Parse reads either format: a table when the text holds nvidia-smi's box drawing, CSV
// otherwise. It fails when no GPU is listed, so "No devices were found" or a driver error
// never reads as an empty, healthy host, and with a *MissingGPUsError when the list is
// visibly incomplete (a GPU nvidia-smi could not open, a gap in the indexes): a GPU that
// fell off the bus is skipped while the others are listed and the exit status may be 0.
func Parse(text string) ([]GPU, error) {
	if strings.Contains(text, "NVIDIA-SMI ") && strings.Contains(text, "+---") {
		return ParseTable(text)
	}
	return ParseCSV(text)
}

// ParseCSV reads `--query-gpu=index,name,driver_version[,pci.bus_id] --format=csv`, with or
// without the header line.
func ParseCSV(text string) ([]GPU, error) {
	var gpus []GPU
	var handles []HandleError
	unreadable := 0
	seen := map[int]bool{}
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" {
			continue
		}
		if h, ok := ParseHandleError(line); ok {
			handles = append(handles, h)
			continue
		}
		f := strings.Split(line, ",")
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		if len(gpus) == 0 && strings.EqualFold(f[0], "index") {
			continue // header
		}
		if len(f) != 3 && len(f) != 4 {
			return nil, fmt.Errorf("nvidia-smi: line %d: want index, name, driver_version, pci.bus_id; got %q", n+1, textcut.Head(line, 120))
		}
		if allBracketed(f) {
			unreadable++ // "[Unknown Error], [Unknown Error], ...": a GPU with no readable field
			continue
		}
		idx, err := strconv.Atoi(f[0])
		if err != nil || idx < 0 || idx > 1<<16 {
			return nil, fmt.Errorf("nvidia-smi: line %d: index %q is not a number: %q", n+1, textcut.Head(f[0], 120), textcut.Head(line, 120))
		}
		if seen[idx] {
			return nil, fmt.Errorf("nvidia-smi: line %d: GPU index %d listed twice", n+1, idx)
		}
		seen[idx] = true
		g := GPU{Index: idx, Name: f[1], DriverVersion: f[2]}
		if len(f) == 4 {
			g.BusID = f[3]
		}
		if g.Name == "" || g.DriverVersion == "" {
			return nil, fmt.Errorf("nvidia-smi: line %d: empty name or driver version: %q", n+1, textcut.Head(line, 120))
		}
		gpus = append(gpus, g)
	}
	if len(gpus) == 0 && len(handles) == 0 && unreadable == 0 {
		return nil, errors.New("nvidia-smi: no GPU listed")
	}
	if err := Incomplete("nvidia-smi --query-gpu", indexes(gpus), handles, unreadable); err != nil {
		return nil, err
	}
	return gpus, nil
}

// allBracketed reports a row whose every cell is a bracketed NVML message.
func allBracketed(cells []string) bool {
	for _, c := range cells {
		if len(c) < 2 || c[0] != '[' || c[len(c)-1] != ']' {
			return false
		}
	}
	return len(cells) > 0
}

func indexes(gpus []GPU) []int {
	out := make([]int, len(gpus))
	for i, g := range gpus {
		out[i] = g.Index
	}
	return out
}

var (
	tableDriver = regexp.MustCompile(`Driver Version:\s*([0-9][0-9A-Za-z.\-]*)`)
	tableCUDA   = regexp.MustCompile(`CUDA Version:\s*([0-9][0-9.]*)`)
	// "|   0  NVIDIA B200                    On  |   00000000:51:00.0 Off |" (also older
	// drivers' "| 0  Tesla V100-SXM2...  On   | 00000000:00:1E.0 Off |").
	tableRow = regexp.MustCompile(`^\|\s*(\d+)\s+(.+?)\s+(On|Off)\s+\|\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s`)
)

// ParseTable reads the default `nvidia-smi` table. Every GPU gets the header's driver version.
func ParseTable(text string) ([]GPU, error) {
	m := tableDriver.FindStringSubmatch(text)
	if m == nil {
		return nil, errors.New("nvidia-smi: table has no \"Driver Version:\" header")
	}
	driver := m[1]
	var gpus []GPU
	var handles []HandleError
	seen := map[int]bool{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimRight(line, "\r")
		if h, ok := ParseHandleError(line); ok {
			handles = append(handles, h)
			continue
		}
		r := tableRow.FindStringSubmatch(line)
		if r == nil {
			continue
		}
		idx, err := strconv.Atoi(r[1])
		if err != nil || idx > 1<<16 {
			return nil, fmt.Errorf("nvidia-smi: GPU index %q is not a number", textcut.Head(r[1], 120))
		}
		if seen[idx] {
			return nil, fmt.Errorf("nvidia-smi: table lists GPU %d twice", idx)
		}
		seen[idx] = true
		gpus = append(gpus, GPU{Index: idx, Name: strings.TrimSpace(r[2]), DriverVersion: driver, BusID: r[4]})
	}
	if len(gpus) == 0 && len(handles) == 0 {
		return nil, errors.New("nvidia-smi: table lists no GPU")
	}
	if err := Incomplete("nvidia-smi", indexes(gpus), handles, 0); err != nil {
		return nil, err
	}
	return gpus, nil
}

// CUDAVersion returns the "CUDA Version:" of a table header (the highest CUDA the driver
// supports), or "" when the text has none (the CSV query does not print it).
func CUDAVersion(text string) string {
	if m := tableCUDA.FindStringSubmatch(text); m != nil {
		return m[1]
	}
	return ""
}
