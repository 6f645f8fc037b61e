package nvsmi

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// HandleError is nvidia-smi's line for a GPU it could not open, printed while it goes on
// listing the others: "Unable to determine the device handle for GPU3: 0000:04:00.0: Unknown
// Error" (also "for GPU 0000:04:00.0: ...", "for GPU0000:25:00.0: ...", "for GPU2: ...").
// A GPU that fell off the bus is then simply absent from a --query-gpu list, and the GPUs
// after it keep their indexes, so the list has a gap.
type HandleError struct {
	// Index is the GPU index the line names; -1 when it names none.
	Index int
	// BusID is the PCI address the line names ("0000:04:00.0"); "" when it names none.
	BusID string
	// Reason is NVML's message ("Unknown Error", "GPU is lost", "Not Found").
	Reason string
}

func (h HandleError) String() string {
	var who []string
	if h.Index >= 0 {
		who = append(who, "GPU "+strconv.Itoa(h.Index))
	}
	if h.BusID != "" {
		who = append(who, h.BusID)
	}
	if len(who) == 0 {
		who = append(who, "a GPU")
	}
	return strings.Join(who, " at ") + ": " + h.Reason
}

const handlePrefix = "unable to determine the device handle for gpu"

var (
	handleIndex = regexp.MustCompile(`^\s*(\d{1,5})\s*(?::|$)`)
	handleBus   = regexp.MustCompile(`^\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*(?::|$)`)
)

// ParseHandleError reads one "Unable to determine the device handle for GPU..." line.
func ParseHandleError(line string) (HandleError, bool) {
	line = strings.TrimSpace(line)
	if len(line) < len(handlePrefix) || !strings.EqualFold(line[:len(handlePrefix)], handlePrefix) {
		return HandleError{}, false
	}
	rest := line[len(handlePrefix):]
	h := HandleError{Index: -1}
	// "GPU3: 0000:04:00.0: ..." names the index first; "GPU 0000:04:00.0: ..." only the bus,
	// whose domain must not be read as an index.
	if m := handleIndex.FindStringSubmatch(rest); m != nil && !handleBus.MatchString(rest) {
		h.Index, _ = strconv.Atoi(m[1])
		rest = rest[len(m[0]):]
	}
	if m := handleBus.FindStringSubmatch(rest); m != nil {
		h.BusID = m[1]
		rest = rest[len(m[0]):]
	}
	h.Reason = textcut.Head(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), ":")), 120)
	if h.Reason == "" {
		h.Reason = "no reason given"
	}
	return h, true
}

// IndexGaps returns the indexes missing below the highest one listed: nvidia-smi numbers
// the GPUs it enumerates 0..n-1, so a hole is a GPU it skipped. A GPU missing after the
// highest index listed leaves no hole: only the expected count reveals it.
func IndexGaps(indexes []int) []int {
	if len(indexes) == 0 {
		return nil
	}
	seen := map[int]bool{}
	hi := 0
	for _, i := range indexes {
		seen[i] = true
		hi = max(hi, i)
	}
	if hi > 1<<12 {
		hi = 1 << 12 // an index this high is not a GPU count; do not allocate for it
	}
	var gaps []int
	for i := 0; i < hi; i++ {
		if !seen[i] {
			gaps = append(gaps, i)
		}
	}
	return gaps
}

// MissingGPUsError says the GPU list is incomplete: nvidia-smi named GPUs it could not open,
// printed a row it could not read, or left a gap in the indexes. The GPUs that were listed
// are in Listed; a judge must not read the list as the host's GPUs.
type MissingGPUsError struct {
	Tool string
	// Listed are the indexes of the GPUs that were listed.
	Listed []int
	// Gaps are the indexes missing below the highest one listed.
	Gaps []int
	// Handles are nvidia-smi's "Unable to determine the device handle" lines.
	Handles []HandleError
	// UnreadableRows counts rows whose every field (the index too) was an NVML error
	// ("[Unknown Error], [Unknown Error], ...").
	UnreadableRows int
}

func (e *MissingGPUsError) Error() string {
	var parts []string
	for _, h := range e.Handles {
		parts = append(parts, "could not open "+h.String())
	}
	if e.UnreadableRows > 0 {
		parts = append(parts, fmt.Sprintf("%d row(s) with no readable field", e.UnreadableRows))
	}
	if len(e.Gaps) > 0 {
		parts = append(parts, fmt.Sprintf("GPU index(es) %s missing from the list", joinInts(e.Gaps)))
	}
	return fmt.Sprintf("%s: GPU list incomplete (%d listed): %s", e.Tool, len(e.Listed), strings.Join(parts, "; "))
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

// Incomplete returns a *MissingGPUsError when handles, unreadable rows or index gaps say the
// list of GPUs with these indexes is incomplete, else nil. tool names the command in the
// error.
func Incomplete(tool string, indexes []int, handles []HandleError, unreadableRows int) error {
	gaps := IndexGaps(indexes)
	if len(handles) == 0 && unreadableRows == 0 && len(gaps) == 0 {
		return nil
	}
	listed := slices.Clone(indexes)
	slices.Sort(listed)
	return &MissingGPUsError{Tool: tool, Listed: listed, Gaps: gaps, Handles: handles, UnreadableRows: unreadableRows}
}
