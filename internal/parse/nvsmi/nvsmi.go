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
// never reads as an empty, healthy host.
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
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" {
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
		idx, err := strconv.Atoi(f[0])
		if err != nil || idx < 0 {
			return nil, fmt.Errorf("nvidia-smi: line %d: index %q is not a number: %q", n+1, textcut.Head(f[0], 120), textcut.Head(line, 120))
		}
		g := GPU{Index: idx, Name: f[1], DriverVersion: f[2]}
		if len(f) == 4 {
			g.BusID = f[3]
		}
		if g.Name == "" || g.DriverVersion == "" {
			return nil, fmt.Errorf("nvidia-smi: line %d: empty name or driver version: %q", n+1, textcut.Head(line, 120))
		}
		gpus = append(gpus, g)
	}
	if len(gpus) == 0 {
		return nil, errors.New("nvidia-smi: no GPU listed")
	}
	return gpus, nil
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
	for _, line := range strings.Split(text, "\n") {
		r := tableRow.FindStringSubmatch(strings.TrimRight(line, "\r"))
		if r == nil {
			continue
		}
		idx, err := strconv.Atoi(r[1])
		if err != nil {
			return nil, fmt.Errorf("nvidia-smi: GPU index %q: %w", textcut.Head(r[1], 120), err)
		}
		gpus = append(gpus, GPU{Index: idx, Name: strings.TrimSpace(r[2]), DriverVersion: driver, BusID: r[4]})
	}
	if len(gpus) == 0 {
		return nil, errors.New("nvidia-smi: table lists no GPU")
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
