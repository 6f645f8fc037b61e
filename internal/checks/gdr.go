package checks

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

func init() {
	register(Entry{
		ID: result.GPUDirectRDMA, Phase: PhaseFunction, Family: "efa", Order: 520, Judge: judgeGPUDirectRDMA,
		Doc:   "on EFA hosts, a short all-reduce with `NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NVLS_ENABLE=0`, so the ranks of one node talk through aws-ofi-nccl and the EFA devices: correct data, every network channel `via NET/Libfabric/.../GDRDMA` (without GPUDirect RDMA NCCL stages every transfer through host memory, silently), bus bandwidth against `gpudirect_rdma.busbw_floor_gbps` (else reported with a warning); the `efa_nv_peermem` module loaded when the EFA installer lists `efa-nv-peermem`; on an EFA-capable host whose launch attached no EFA interface it warns (not judged here: the post-processor's verification attaches them and judges it); where EFA was due and is missing (a verification launch EC2 gave none, a fleet node) it warns, and `efa-devices` fails",
		Reads: "`all_reduce_perf` output, `lsmod`",
	})
}

// peerMemModule is the kernel module that lets the EFA device read and write GPU memory, which
// the EFA installer ships as efa-nv-peermem.
const peerMemModule = "efa_nv_peermem"

// judgeGPUDirectRDMA judges the forced-network all-reduce: its data must be correct, every
// network channel must go via NET/...Libfabric.../GDRDMA (without GPUDirect RDMA, NCCL
// silently stages every transfer through host memory at a fraction of the bandwidth), and
// the bus bandwidth is reported against a floor. The peer-memory module the EFA installer
// record lists must be loaded.
func judgeGPUDirectRDMA(f facts.Run, t Target) result.Check {
	id := result.GPUDirectRDMA
	o, run := t.Function.GDR, f.GDR
	installer, loaded := f.Host.EFAInstaller, f.Host.Loaded
	expected := "channels via NET/Libfabric/.../GDRDMA, correct data"
	basis := BasisRule
	if o.BusBWFloorGBps > 0 {
		expected += fmt.Sprintf(", busbw >= %s GB/s", ncclNum(o.BusBWFloorGBps))
		basis = BasisSetting
	}
	switch {
	case run.NotApplicable != "" && t.efaUnattached() != "":
		return check(id, result.Warn, "", expected, "no EFA device attached", "not judged here: "+t.efaUnattached()+"; "+efaProvenElsewhere, "")
	case run.NotApplicable != "" && t.efaMissing() != "":
		return check(id, result.Warn, "", expected, "no EFA device", "not judged: no EFA device to test: "+t.efaMissing(), "")
	case run.NotApplicable != "":
		return check(id, result.Skip, BasisRule, "no EFA device", "no EFA device", run.NotApplicable, "")
	case run.NotRun != "":
		return check(id, result.Skip, "", "", "", "not run: "+run.NotRun, "")
	case run.Problem != "":
		return check(id, result.Error, "", "the forced-network all-reduce runs", "could not run", run.Problem, run.Tail)
	}
	res := run.Result
	ev := textcut.Tail(run.Tail, ncclEvidenceMax)
	var fails []string
	if installer.OK() {
		if listed := slices.Contains(installer.Value.Names, "efa-nv-peermem"); listed {
			switch {
			case !loaded.OK():
				fails = append(fails, "the loaded modules could not be read: "+loaded.Problem)
			case !loaded.Value.Has(peerMemModule):
				fails = append(fails, "the EFA installer lists efa-nv-peermem but the "+peerMemModule+" module is not loaded: the EFA device cannot reach GPU memory (modprobe "+peerMemModule+")")
			}
		}
	}
	if run.TimedOut {
		return check(id, result.Fail, basis, expected, "timed out", strings.Join(append(fails, "the forced-network all-reduce did not finish"), "; "), ev)
	}
	corr := ncclCorrectness(run, settings.NCCL{Args: settings.GDRArgs})
	if corr.Status.Failing() {
		fails = append(fails, "the forced-network all-reduce is not correct: "+corr.Message)
	}
	var net, gdr []string
	for _, p := range res.Transport.DataPaths {
		if strings.HasPrefix(p, "NET/") {
			net = append(net, p)
			if strings.HasSuffix(p, "/GDRDMA") && strings.Contains(strings.ToLower(p), "libfabric") {
				gdr = append(gdr, p)
			}
		}
	}
	switch {
	case len(net) == 0:
		fails = append(fails, "no channel went over the network: NCCL did not use aws-ofi-nccl with NVLink and shared memory off")
	case len(gdr) < len(net):
		fails = append(fails, "channels go via "+strings.Join(net, ", ")+" without GDRDMA: NCCL stages every transfer through host memory (check the peer-memory module and that the GPUs and EFA devices share a PCIe switch)")
	}
	bw := -1.0
	if res.Largest != nil && res.Largest.OutOfPlace.BusBW != nil {
		bw = *res.Largest.OutOfPlace.BusBW
	}
	actual := fmt.Sprintf("%s; busbw %s GB/s", strings.Join(net, ", "), ncclNum(max(bw, 0)))
	if bw < 0 {
		fails = append(fails, "the forced-network all-reduce printed no bus bandwidth")
	} else if o.BusBWFloorGBps > 0 && bw < o.BusBWFloorGBps {
		fails = append(fails, fmt.Sprintf("busbw %s GB/s below gpudirect_rdma.busbw_floor_gbps %s", ncclNum(bw), ncclNum(o.BusBWFloorGBps)))
	}
	if len(fails) > 0 {
		return check(id, result.Fail, basis, expected, actual, strings.Join(fails, "; "), ev)
	}
	if o.BusBWFloorGBps == 0 {
		return check(id, result.Warn, basis, expected, actual, "bus bandwidth not judged: set gpudirect_rdma.busbw_floor_gbps to set a floor", "")
	}
	return check(id, result.Pass, basis, expected, actual, "", "")
}
