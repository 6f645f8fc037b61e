#!/usr/bin/env python3
"""Writes the derived fixtures of the data-path and rule-table tests (see each .source).

Run from this directory: python3 derive-fixtures.py. It reads synthetic-p6b200-1node-ok.txt and
p3dn-2node-efa-nccl2.4.8-oldest-format.txt and writes:
  derived-p6b200-1node-nvls.txt      NVLS multicast available and set up, P2P/CUMEM rings
  derived-p2p-disabled-shm.txt       NCCL_P2P_DISABLE=1: the ranks connect via SHM/direct/direct
  derived-ring-via-socket-nccl2.4.txt NCCL 2.4.8 Ring lines over NET/Socket/0 (INFO only)
  derived-ofi-banner-message-only.txt a message-only excerpt with a bare aws-ofi-nccl banner
Line formats are the printf formats of NCCL and nccl-tests quoted in the .source files.
"""
import re

RANKS = 8


def getfloatstr(v, width=7):
    """nccl-tests 2.17+ getFloatStr: %.2f while it fits, then %.1f, then %.0f."""
    for fmt in ("%.2f", "%.1f", "%.0f"):
        s = fmt % v
        if len(s) <= width:
            return s.rjust(width)
    return ("%.0f" % v).rjust(width)


def rows_217(bw_gbs, latency_us, nranks=RANKS):
    """Rows of nccl-tests 2.17 (root column, #wrong), sizes 8 B .. 1 GiB, a simple
    latency + size/bandwidth model; busbw = algbw * 2(n-1)/n for all-reduce."""
    out, total = [], 0.0
    factor = 2 * (nranks - 1) / nranks
    size = 8
    while size <= 1 << 30:
        res = []
        for extra in (0.0, 0.06):
            t = latency_us + extra + size / (bw_gbs * 1e3)
            alg = size / (t * 1e3)
            res.append((t, alg, alg * factor))
        total += res[0][2]
        out.append("%12d  %12d  %8s  %6s  %6d" % (size, size // 4, "float", "sum", -1)
                   + "".join("  %s  %6.2f  %6.2f  %6d" % (getfloatstr(t), a, b, 0) for t, a, b in res))
        size *= 2
    return out, total / len(out)


def p6_lines():
    with open("synthetic-p6b200-1node-ok.txt") as f:
        return f.read().split("\n")


def nvls():
    out = []
    for line in p6_lines():
        out.append(line)
        m = re.match(r"(ip-10-0-1-23:\d+:\d+ \[(\d)\] NCCL INFO )(.*)", line)
        if not m:
            continue
        prefix, dev, msg = m.group(1), int(m.group(2)), m.group(3)
        if msg == "Using network Libfabric":
            out.append(prefix + "NVLS multicast support is available on dev %d (NVLS_NCHANNELS 24)" % dev)
        if msg.startswith("Connected all rings"):
            out.append(prefix + "NVLS comm 0x55d0c0a0000%d headRank %d nHeads 8 nvlsRanks 8 buffSize 1048576 "
                       "nvlsPerRankSize 50331648 nvlsTotalSize 402653184" % (dev, dev))
    return "\n".join(out)


def shm():
    table, avg = rows_217(bw_gbs=12.0, latency_us=28.0)
    out, in_table = [], False
    for line in p6_lines():
        m = re.match(r"(ip-10-0-1-23:\d+:\d+ \[(\d)\] NCCL INFO )(.*)", line)
        if m and m.group(3) == "Comm config Blocking set to 1":
            out.append(line)
            out.append(m.group(1) + "NCCL_P2P_DISABLE set by environment to 1.")
            continue
        if m and m.group(3).startswith("Channel "):
            dev = int(m.group(2))
            out.append(m.group(1) + "Channel 00 : %d[%d] -> %d[%d] via SHM/direct/direct" % (dev, dev, (dev + 1) % 8, (dev + 1) % 8))
            continue
        if re.match(r"^ +\d+ +\d+ +float", line):
            if not in_table:
                out.extend(table)
                in_table = True
            continue
        if line.startswith("# Avg bus bandwidth"):
            out.append("# Avg bus bandwidth    : %g " % float("%.6g" % avg))
            continue
        out.append(line)
    return "\n".join(out)


def ring_socket():
    with open("p3dn-2node-efa-nccl2.4.8-oldest-format.txt") as f:
        lines = f.read().split("\n")
    head = [l for l in lines if l.startswith("#") and "Rank" in l or l.startswith("# nThread")]
    head.insert(1, "#")
    head.insert(2, "# Using devices")
    out = head + ["", "-----------------------------some output truncated-----------------------------------", ""]
    pids = [int(re.search(r"Pid +(\d+)", l).group(1)) for l in head if "Pid" in l]
    hosts = [("ip-172-31-41-105", 3862), ("ip-172-31-41-36", 4185)]
    for node, (host, tid) in enumerate(hosts):
        for dev in range(8):
            rank = node * 8 + dev
            pfx = "%s:%d:%d [%d] NCCL INFO " % (host, pids[rank], tid + dev, dev)
            if dev == 7:
                peer = (rank + 1) % 16
                out.append(pfx + "Ring 00 : %d -> %d [send] via NET/Socket/0" % (rank, peer))
            else:
                out.append(pfx + "Ring 00 : %d[%d] -> %d[%d] via P2P/IPC" % (rank, dev, rank + 1, dev + 1))
            if dev == 0:
                prev = (rank + 15) % 16
                out.append(pfx + "Ring 00 : %d -> %d [receive] via NET/Socket/0" % (prev, rank))
    out.append("ip-172-31-41-105:3801:3862 [0] NCCL INFO Using 256 threads, Min Comp Cap 7, Trees disabled")
    for node, (host, tid) in enumerate(hosts):
        for dev in range(8):
            rank = node * 8 + dev
            out.append("%s:%d:%d [%d] NCCL INFO comm 0x7f%02x5c0025b0 rank %d nranks 16 cudaDev %d nvmlDev %d - Init COMPLETE"
                       % (host, pids[rank], tid + dev, dev, rank, rank, dev, dev))
    out += [l for l in lines if l.startswith("#") and ("size" in l or "(B)" in l or "out-of-place" in l)]
    size, total, n = 8, 0.0, 0
    while size <= 1 << 30:
        res = []
        for extra in (0.0, 1.3):
            t = 180.0 + extra + size / 0.85e3
            alg = size / (t * 1e3)
            res.append((t, alg, alg * 30 / 16))
        total += res[0][2]
        n += 1
        cell = lambda t: ("%7.0f" if t > 10000 else "%7.1f" if t > 100 else "%7.2f") % t
        out.append("%12d  %12d  %6s  %6s" % (size, size // 4, "float", "sum")
                   + "".join("  %s  %6.2f  %6.2f  %5s" % (cell(t), a, b, "5e-07") for t, a, b in res))
        size *= 2
    out += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : %g" % float("%.6g" % (total / n)), ""]
    return "\n".join(out)


def ofi_banner():
    table, avg = rows_217(bw_gbs=406.89, latency_us=20.0)
    msgs = [
        "NCCL version 2.27.7+cuda13.0",
        "Initializing aws-ofi-nccl 1.9.1",
        "Selected provider is efa, fabric is efa-direct (found 8 nics)",
        "Using network Libfabric",
        "Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read",
        "Connected all rings, use ring PXN 0 GDR 1",
    ]
    lines = p6_lines()
    last_rank = max(i for i, l in enumerate(lines) if l.startswith("#  Rank"))
    columns = [l for l in lines if l.startswith("#") and ("size" in l or "(B)" in l or "out-of-place" in l)]
    body = lines[1:last_rank + 1] + msgs + ["#"] + columns + table
    body += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : %g " % float("%.6g" % avg), ""]
    return "\n".join(body)


for name, text in [("derived-p6b200-1node-nvls.txt", nvls()), ("derived-p2p-disabled-shm.txt", shm()),
                   ("derived-ring-via-socket-nccl2.4.txt", ring_socket()),
                   ("derived-ofi-banner-message-only.txt", ofi_banner())]:
    with open(name, "w") as f:
        f.write(text if text.endswith("\n") else text + "\n")
