# Regenerate: python3 generate.py (writes into this directory; paths below are for the repo at /work/main).
# Generates the synthetic/derived NCCL test logs in this directory, the one copy the parser
# (internal/parse/nccltests), the judge (internal/checks) and the bake tests read. Formats follow the printf formats in the nccl-tests
# FORMAT-NOTES (v2.17.x) and INFO lines as printed by NCCL 2.2x / aws-ofi-nccl 1.1x.
import os
OUT=os.path.dirname(os.path.abspath(__file__))
HOST="ip-10-0-1-23"
BIN="/usr/local/cuda-13.0/efa/test-cuda-13.0/all_reduce_perf"

def fstr(v, width):
    for fmt in ("%.2f","%.1f","%.0f"):
        s=fmt%v
        if len(s)<=width: return s
    return "%.1e"%v

def rows(maxb=1<<30, peak=410.0, lat=20.0, wrong=None, na=False, stop=None):
    out=[]
    s=8
    while s<=maxb:
        if stop and s>stop: break
        t=lat+s/(peak*1e3)
        alg=s/(t*1e3)
        bus=alg*2*7/8
        w="N/A" if na else ("%g"%(wrong.get(s,0) if wrong else 0))
        half="  %7s  %6s  %6s  %6s"%(fstr(t,7),fstr(alg,6),fstr(bus,6),w)
        t2=t*1.003; alg2=s/(t2*1e3); bus2=alg2*1.75
        half2="  %7s  %6s  %6s  %6s"%(fstr(t2,7),fstr(alg2,6),fstr(bus2,6),w)
        out.append("%12d  %12d  %8s  %6s  %6d"%(s,s//4,"float","sum",-1)+half+half2)
        s*=2
    return out

def info(r, msg, tid=None):
    pid=4100+r
    return "%s:%d:%d [%d] NCCL INFO %s"%(HOST,pid,tid or pid,r,msg)

def info_lines(net="ofi", nics=8, forward=False):
    L=[]
    for r in range(8):
        pid=4100+r; tid=pid+60
        L.append(info(r,"Bootstrap: Using enp71s0:10.0.1.23<0>"))
        L.append(info(r,"cudaDriverVersion 13020"))
        if r==0:
            L.append(info(r,"NCCL version 2.27.7+cuda13.0"))
        L.append(info(r,"Comm config Blocking set to 1"))
        if forward and r==0:
            L.append(info(r,"CUDA Forward Compatibility mode ENABLED"))
        if net=="ofi":
            L+= [info(r,m,tid) for m in [
                "NET/Plugin: Plugin name set by env to libnccl-net.so",
                "NET/Plugin: Loaded net plugin Libfabric (v10)",
                "Successfully loaded external plugin libnccl-net.so",
                "NET/OFI Initializing aws-ofi-nccl 1.21.1",
                "NET/OFI Using Libfabric version 2.6",
                "NET/OFI Using CUDA driver version 13020 with runtime 13000",
                "NET/OFI Configuring AWS-specific options",
                "NET/OFI Setting provider_filter to efa",
                "NET/OFI Running on p6-b200.48xlarge platform, topology file /opt/amazon/ofi-nccl/share/aws-ofi-nccl/xml/p6-b200.48xl-topo.xml",
                "NET/OFI Selected provider is efa, fabric is efa-direct (found %d nics)"%nics,
                "NET/OFI Support for global registrations: true",
                "NET/OFI Support for DMA-BUF registrations: true",
                "Initialized NET plugin Libfabric",
                "Assigned NET plugin Libfabric to comm",
                "Using network Libfabric"]]
        elif net=="socket":
            L+= [info(r,m,tid) for m in [
                "NET/Plugin: Could not find: libnccl-net.so. Using internal net plugin.",
                "NET/IB : No device found.",
                "NET/Socket : Using [0]enp71s0:10.0.1.23<0>",
                "Initialized NET plugin Socket",
                "Assigned NET plugin Socket to comm",
                "Using network Socket"]]
        elif net=="ib":
            L+= [info(r,m,tid) for m in [
                "NCCL_NET set by environment to IB",
                "NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB enp71s0:10.0.1.23<0>",
                "Initialized NET plugin IB",
                "Assigned NET plugin IB to comm",
                "Using network IB"]]
        L.append(info(r,"ncclCommInitRankConfig comm 0x55d0c0a%05x rank %d nranks 8 cudaDev %d nvmlDev %d busId %d000 commId 0x7c1f3e2a9b5d4f11 - Init START"%(r,r,r,r,r*16+8),tid))
        L.append(info(r,"Channel 00/0 : %d[%d] -> %d[%d] via P2P/CUMEM/read"%(r,r,(r+1)%8,(r+1)%8),tid))
        L.append(info(r,"Connected all rings, use ring PXN 0 GDR 1",tid))
        L.append(info(r,"ncclCommInitRankConfig comm 0x55d0c0a%05x rank %d nranks 8 cudaDev %d nvmlDev %d busId %d000 commId 0x7c1f3e2a9b5d4f11 - Init COMPLETE"%(r,r,r,r,r*16+8),tid))
    return L

def log(net="ofi", nics=8, forward=False, validation=1, wrong=None, na=False, trailer=True, oob="0 OK", stop=None, marker=True):
    L=[]
    if marker: L.append("@@DLAMI-NCCL BINARY "+BIN)
    L.append("# nccl-tests version 2.17.6 nccl-headers=22707 nccl-library=22707")
    L.append("# Collective test starting: all_reduce_perf")
    L.append("# nThread 1 nGpus 1 minBytes 8 maxBytes 1073741824 step: 2(factor) warmup iters: 1 iters: 50 agg iters: 1 validation: %d graph: 0"%validation)
    L.append("#")
    L.append("# Using devices")
    for r in range(8):
        L.append("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s"%(r,0,4100+r,HOST,r,0,0x18+r*0x10,0,"NVIDIA B200"))
    L+=info_lines(net,nics,forward)
    L.append("#")
    L.append("#                                                              out-of-place                       in-place          ")
    L.append("#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong ")
    L.append("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         ")
    R=rows(wrong=wrong,na=na,stop=stop)
    L+=R
    bws=[]
    for r in R:
        f=r.split()
        bws+= [float(f[7]), float(f[11])]
    if trailer:
        L.append("# Out of bounds values : %s"%oob)
        L.append("# Avg bus bandwidth    : %g "%(sum(bws)/len(bws)))
        L.append("")
        L.append("#")
        L.append("# Collective test concluded: all_reduce_perf")
    return "\n".join(L)+"\n"

SYN=("Synthetic (not a captured run). Generated for the packer-plugin-dlami tests: nccl-tests "
     "v2.17.x stdout per the printf formats in FORMAT-NOTES-from-nccl-tests-source.txt "
     "(NVIDIA/nccl-tests HEAD a0b82b2), NCCL INFO lines modelled on NCCL 2.27 + aws-ofi-nccl 1.1x "
     "output (e.g. 'Selected provider is efa, fabric is efa (found N nics)', 'Loaded net plugin "
     "Libfabric (v10)', 'Using network Libfabric'). 1 node, 8 ranks (P6-B200-like), 8B..1GiB, "
     "busbw at 1 GiB about 712 GB/s (the host-layer reference is 711). First line is the "
     "marker printed by checks.NCCLCommand's script.\n")
files={
 "synthetic-p6b200-1node-ok": (log(), SYN),
 "derived-socket-fallback": (log(net="socket"), SYN+"Derived: the aws-ofi-nccl plugin is missing, NCCL falls back to its socket transport (NET/Socket, 'Using network Socket'); busbw still fine (NVLink) to show that speed alone does not catch it.\n"),
 "derived-network-ib": (log(net="ib"), SYN+"Derived: NCCL_NET=IB forced, NCCL uses its built-in IB transport ('Using network IB').\n"),
 "derived-nics-4": (log(nics=4), SYN+"Derived: aws-ofi-nccl found only 4 EFA nics where the instance has 8.\n"),
 "derived-forward-compat": (log(forward=True), SYN+"Derived: adds the informational 'CUDA Forward Compatibility mode ENABLED' line.\n"),
 "derived-oob-failed": (log(wrong={1<<20:12, 1<<30:3}, oob="15 FAILED"), SYN+"Derived: validation found wrong values (#wrong 12 at 1 MiB and 3 at 1 GiB), trailer '15 FAILED'.\n"),
 "derived-validation-off": (log(validation=0, na=True), SYN+"Derived: run with -c 0: header 'validation: 0', #wrong cells 'N/A', trailer '0 OK' although nothing was checked.\n"),
 "derived-no-trailer": (log(trailer=False, stop=1<<28), SYN+"Derived: cut after the 256 MiB row, no trailer (hung and killed by timeout, or connection lost).\n"),
}
files["derived-ncclnet-ib-failed"]=(
 "@@DLAMI-NCCL BINARY "+BIN+"\n"+
 "# nccl-tests version 2.17.6 nccl-headers=22707 nccl-library=22707\n# Collective test starting: all_reduce_perf\n"+
 "# nThread 1 nGpus 1 minBytes 8 maxBytes 1073741824 step: 2(factor) warmup iters: 1 iters: 50 agg iters: 1 validation: 1 graph: 0\n#\n# Using devices\n"+
 "".join("#  Rank %2d Group  0 Pid %6d on %10s device %2d [0000:%02x:00] NVIDIA B200\n"%(r,4100+r,HOST,r,0x18+r*0x10) for r in range(8))+
 "".join(info(r,"NCCL_NET set by environment to IB")+"\n"+info(r,"NET/IB : Using [0]ibp115s0f0:1/IB [RO]; OOB enp71s0:10.0.1.23<0>")+"\n"+
         "%s:%d:%d [%d] NCCL WARN Error: network IB not found.\n"%(HOST,4100+r,4100+r,r)+
         "%s: Test NCCL failure common.cu:1279 'invalid usage (run with NCCL_DEBUG=WARN for details) / Error: network IB not found.'\n"%HOST for r in range(2))+
 " .. %s pid %d: Test failure common.cu:1139\n"%(HOST,4100)+
 "--------------------------------------------------------------------------\nPrimary job  terminated normally, but 1 process returned\na non-zero exit code. Per user-direction, the job has been aborted.\n--------------------------------------------------------------------------\n"+
 "--------------------------------------------------------------------------\nmpirun detected that one or more processes exited with non-zero status, thus causing\nthe job to be terminated. The first process to do so was:\n\n  Process name: [[41021,1],0]\n  Exit code:    3\n--------------------------------------------------------------------------\n",
 SYN+"Derived: NCCL_NET=IB forced on a host whose ConnectX-7 ports are down: NCCL finds no IB network and the test aborts before the table (mpirun exit 3).\n")
files["derived-binary-missing"]=("@@DLAMI-NCCL ERROR no nccl-tests binary: nothing matches /usr/local/cuda-*/efa/test-cuda-*/all_reduce_perf (is this the Deep Learning Base OSS DLAMI?)\n",
 "Synthetic: the output of checks.NCCLCommand's script when no all_reduce_perf is installed.\n")
files["derived-garbage"]=("\x00\x01binary\xff junk\n12 34 56\n# size count\n1 2 float sum -1 x y z 0 a b c 0\nUsing network\n# Out of bounds values : many OK\n"+"A"*5000+"\n",
 "Synthetic garbage: NUL bytes, a half row with non-numeric cells, an empty 'Using network', a trailer without a number, a 5000-byte line.\n")
for name,(body,src) in files.items():
    with open(os.path.join(OUT,name+".txt"),"w",encoding="latin-1") as f: f.write(body)
    with open(os.path.join(OUT,name+".source"),"w") as f: f.write(src)
print("ok")
