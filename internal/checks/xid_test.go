package checks

import (
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/kernlog"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

const healthyLog = `[    0.000000] Linux version 7.0.0-1014-aws (buildd@lcy02-amd64-015)
[   12.311904] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  595.91.07
[   14.022173] gdrdrv:gdrdrv_init: loading gdrdrv version 2.5.1`

// xidAfter judges log's lines after p as the bake does after the NCCL test, folded into earlier.
func xidAfter(earlier result.Check, log string, p kernlog.Position, tg Target) result.Check {
	f := facts.Read(facts.KernelLog{Text: log, BootID: "boot-1"}, "")
	if log == "" {
		f = facts.Unread[facts.KernelLog]("dmesg printed nothing", "")
	}
	return FoldXid(earlier, JudgeKernelLog(f, &facts.Mark{Position: p, During: "during the NCCL test"}, tg))
}

func TestJudgeXidAfter(t *testing.T) {
	tg := Target{}
	log := healthyLog
	before := JudgeKernelLog(facts.Read(facts.KernelLog{Text: log, BootID: "boot-1"}, ""), nil, tg)
	if before.Status != result.Pass {
		t.Fatalf("healthy log: %s", before.Status)
	}
	p := kernlog.Mark(log, "boot-1")
	during := log + "\n[ 9000.000001] NVRM: Xid (PCI:0000:62:00): 74, pid=4242, name=all_reduce_perf, NVLink: fatal error detected on link 3"

	c := xidAfter(before, during, p, tg)
	if c.Status != result.Fail || !strings.Contains(c.Message, "during the NCCL test") || !strings.Contains(c.Message, "Xid 74") || !strings.Contains(c.Actual, "during the NCCL test") {
		t.Errorf("Xid during NCCL: %s %q: %s", c.Status, c.Actual, c.Message)
	}
	// Nothing new: the earlier verdict stands.
	if c := xidAfter(before, log, p, tg); c.Status != result.Pass {
		t.Errorf("no new lines: %s: %s", c.Status, c.Message)
	}
	// An Xid already in the log before the mark is the earlier check's, not "during".
	withOld := log + "\n[ 100.0] NVRM: Xid (PCI:0000:62:00): 79, GPU has fallen off the bus."
	old := JudgeKernelLog(facts.Read(facts.KernelLog{Text: withOld, BootID: "boot-1"}, ""), nil, tg)
	pOld := kernlog.Mark(withOld, "boot-1")
	if c := xidAfter(old, withOld, pOld, tg); c.Status != result.Fail || strings.Contains(c.Message, "during") {
		t.Errorf("old Xid: %s: %s", c.Status, c.Message)
	}
	// Both: the message keeps the earlier finding and adds the new one.
	if c := xidAfter(old, withOld+"\n[ 9001.0] NVRM: Xid (PCI:0000:51:00): 74, NVLink", pOld, tg); !strings.Contains(c.Message, "Xid 79") || !strings.Contains(c.Message, "during the NCCL test: Xid 74") {
		t.Errorf("both: %s", c.Message)
	}
	// A log that cannot be read again is not a clean run.
	if c := xidAfter(before, "", p, tg); c.Status != result.Fail {
		t.Errorf("unreadable: %s", c.Status)
	}
	// Ignored numbers stay ignored during the test.
	tg.Expect.IgnoreXids = []int{74}
	if c := xidAfter(before, during, p, tg); c.Status != result.Pass {
		t.Errorf("ignored Xid 74 during: %s: %s", c.Status, c.Message)
	}
}
