package simfleet

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nccltests"
	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
)

// addrNone is an address where no simulated instance listens (this package's range).
const addrNone = "127.0.200.4"

// TestMultiNodeAllReduceOverSSH runs the post-processor's multi-node NCCL test (issue 26) the
// way the plugin does: on the first of the instances, as ubuntu, `timeout ... mpirun` from the
// image with a host file of the instances' addresses, the image's all_reduce_perf, and a key
// of the run's own that every instance authorizes, over real sshd with the instances' host keys
// pinned. The simulated mpirun starts the second node's daemon over that SSH; the output is
// read by the plugin's parser. Then the failures the check must tell apart: a node launched
// without EFA (socket fallback, naming it), the security group without its self rules (every
// node stalls; after the timeout the ranks are still there, on each node in its own process
// list, and pkill on each node ends them), and a node whose sshd cannot be reached (Open MPI's
// "unable to reliably start one or more daemons").
func TestMultiNodeAllReduceOverSSH(t *testing.T) {
	f := hostFleet(t)
	ctx := context.Background()
	key := newKeyPair(t)
	var all []int
	for c := 0; c < 32; c++ {
		all = append(all, c)
	}
	const idA, idB, idC = "i-0aaaaaaaaaaaaaa01", "i-0aaaaaaaaaaaaaa02", "i-0aaaaaaaaaaaaaa03"
	start := time.Now()
	for _, m := range []awsfake.MachineSpec{
		{InstanceID: idA, InstanceType: "p5.48xlarge", Address: addrA, AuthorizedKey: key.line, Network: awsfake.MachineNetwork{EFACards: all, EFATraffic: true}},
		{InstanceID: idB, InstanceType: "p5.48xlarge", Address: addrB, AuthorizedKey: key.line, Network: awsfake.MachineNetwork{EFACards: all, EFATraffic: true}},
		// Launched with one default interface: no EFA device.
		{InstanceID: idC, InstanceType: "p5.48xlarge", Address: addrC, AuthorizedKey: key.line, Network: awsfake.MachineNetwork{EFATraffic: true}},
	} {
		if err := f.Start(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("3 instances booted in %s", time.Since(start).Round(time.Millisecond))

	// The run's key pair, the host keys of the instances and the host files, on the first node.
	tmp := t.TempDir()
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "dlami-multinode", "-f", filepath.Join(tmp, "id_ed25519")).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	priv, err := os.ReadFile(filepath.Join(tmp, "id_ed25519"))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := os.ReadFile(filepath.Join(tmp, "id_ed25519.pub"))
	if err != nil {
		t.Fatal(err)
	}
	const dir = "/home/ubuntu/.dlami-multinode"
	var knownHosts strings.Builder
	for _, a := range []string{addrA, addrB, addrC} {
		key.runStdin(t, a, "cat >>/home/ubuntu/.ssh/authorized_keys", string(pub))
		for _, line := range strings.Split(strings.TrimSpace(key.run(t, a, "cat /etc/ssh/ssh_host_ed25519_key.pub /etc/ssh/ssh_host_ecdsa_key.pub")), "\n") {
			fields := strings.Fields(line)
			if len(fields) < 2 {
				t.Fatalf("host key of %s: %q", a, line)
			}
			fmt.Fprintf(&knownHosts, "%s %s %s\n", a, fields[0], fields[1])
		}
	}
	key.runStdin(t, addrA, "umask 077 && mkdir -p "+dir+" && cat >"+dir+"/id_ed25519", string(priv))
	key.runStdin(t, addrA, "cat >"+dir+"/known_hosts", knownHosts.String())
	for name, hosts := range map[string][]string{"ab": {addrA, addrB}, "ac": {addrA, addrC}, "a-none": {addrA, addrNone}} {
		var hf strings.Builder
		for _, h := range hosts {
			fmt.Fprintf(&hf, "%s slots=8\n", h)
		}
		key.runStdin(t, addrA, "cat >"+dir+"/hostfile-"+name, hf.String())
	}

	// run runs the plugin's command on the first node with that host file; the output goes to
	// a file first (a stalled rank keeps what it inherited open), then comes back with the
	// exit status.
	run := func(hostfile string, timeout int) (string, int) {
		t.Helper()
		cmd := fmt.Sprintf(`timeout -k 10 %d /opt/amazon/openmpi/bin/mpirun --prefix /opt/amazon/openmpi -n 16 -N 8 --hostfile %[2]s/hostfile-%[3]s --bind-to none --tag-output `+
			`--mca plm_rsh_agent /usr/bin/ssh --mca plm_rsh_args "-i %[2]s/id_ed25519 -o IdentitiesOnly=yes -o BatchMode=yes -o UserKnownHostsFile=%[2]s/known_hosts -o StrictHostKeyChecking=yes -o ConnectTimeout=20" `+
			`-x LD_LIBRARY_PATH=/usr/local/cuda-13.2/lib:/usr/local/cuda-13.2/lib64:/opt/amazon/efa/lib:/opt/amazon/ofi-nccl/lib -x NCCL_DEBUG=INFO -x FI_PROVIDER=efa `+
			`/usr/local/cuda-13.2/efa/test-cuda-13.2/all_reduce_perf -b 8 -e 16G -f 2 -g 1 -c 1 -n 20 >%[2]s/out 2>&1; echo "rc=$?"; cat %[2]s/out`, timeout, dir, hostfile)
		began := time.Now()
		out := key.run(t, addrA, cmd)
		status, rest, _ := strings.Cut(out, "\n")
		var rc int
		if _, err := fmt.Sscanf(status, "rc=%d", &rc); err != nil {
			t.Fatalf("no exit status: %q", out)
		}
		t.Logf("hostfile-%s: exit %d in %s", hostfile, rc, time.Since(began).Round(time.Millisecond))
		return rest, rc
	}
	parse := func(out string) nccltests.Result {
		t.Helper()
		r, err := nccltests.ParseString(out)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	host := func(r nccltests.Result, addr string) nccltests.HostNet {
		t.Helper()
		for _, h := range r.Hosts {
			if h.Name == EC2HostName(addr) {
				return h
			}
		}
		t.Fatalf("no host %s in %+v", EC2HostName(addr), r.Hosts)
		return nccltests.HostNet{}
	}
	ranks := func(from int) []int {
		var r []int
		for i := from; i < from+8; i++ {
			r = append(r, i)
		}
		return r
	}
	knob := func(id, name, value string) {
		t.Helper()
		p := filepath.Join(f.StateRoot(), "instances", id, "merged", "etc", "dlami-sim", name)
		if value == "" {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			return
		}
		if err := os.WriteFile(p, []byte(value+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("healthy", func(t *testing.T) {
		// An Xid while the test runs on the second node only.
		xid := "NVRM: Xid (PCI:0000:75:00): 79, pid=4242, name=all_reduce_perf, GPU has fallen off the bus."
		knob(idB, "nccl-dmesg", xid)
		defer knob(idB, "nccl-dmesg", "")
		out, rc := run("ab", 120)
		if rc != 0 {
			t.Fatalf("exit %d:\n%s", rc, out)
		}
		r := parse(out)
		if r.NRanks != 16 || r.Devices != 16 || len(r.Hosts) != 2 || r.OutOfBounds == nil || *r.OutOfBounds != 0 || len(r.Errors) != 0 {
			t.Errorf("nranks %d, devices %d, hosts %d, oob %v, errors %q", r.NRanks, r.Devices, len(r.Hosts), r.OutOfBounds, r.Errors)
		}
		for i, a := range []string{addrA, addrB} {
			h := host(r, a)
			if !slices.Equal(h.Ranks, ranks(8*i)) || !h.OFIPlugin || h.Socket || h.NICs == nil || *h.NICs != 32 || !h.GDRDMA || h.NoGDRDMALine != "" {
				t.Errorf("%s: %+v", h.Name, h)
			}
		}
		if r.Largest == nil || r.Largest.SizeBytes != 16<<30 || r.Largest.OutOfPlace.BusBW == nil || *r.Largest.OutOfPlace.BusBW < 470 {
			t.Errorf("largest row %+v", r.Largest)
		}
		for id, want := range map[string]bool{idA: false, idB: true} {
			b, err := os.ReadFile(filepath.Join(f.StateRoot(), "instances", id, "merged", "run", "dlami-sim", "kmsg"))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), xid) != want {
				t.Errorf("%s's kernel log has the Xid: %v, want %v", id, !want, want)
			}
		}
	})

	t.Run("second-node-without-efa", func(t *testing.T) {
		out, rc := run("ac", 120)
		if rc != 0 {
			t.Fatalf("exit %d:\n%s", rc, out)
		}
		r := parse(out)
		if a := host(r, addrA); a.Socket || !a.GDRDMA {
			t.Errorf("the node with EFA: %+v", a)
		}
		if c := host(r, addrC); !c.Socket || !slices.Equal(c.Networks, []string{"Socket"}) || c.GDRDMA || c.NICs != nil || !slices.Equal(c.Ranks, ranks(8)) {
			t.Errorf("the node without EFA: %+v", c)
		}
	})

	t.Run("security-group-without-self-rules", func(t *testing.T) {
		if err := f.SetNetwork(ctx, idB, awsfake.MachineNetwork{EFACards: all, EFATraffic: false, EFATrafficBlockedBy: "the test revoked the self rules"}); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := f.SetNetwork(ctx, idB, awsfake.MachineNetwork{EFACards: all, EFATraffic: true}); err != nil {
				t.Error(err)
			}
		}()
		out, rc := run("ab", 5)
		if rc != 124 {
			t.Errorf("exit %d, want timeout's 124:\n%s", rc, out)
		}
		r := parse(out)
		if r.NRanks != 16 || len(r.Rows) != 0 || r.OutOfBounds != nil {
			t.Errorf("a stalled run: nranks %d, rows %d, trailer %v", r.NRanks, len(r.Rows), r.OutOfBounds)
		}
		for i, a := range []string{addrA, addrB} {
			if h := host(r, a); !slices.Equal(h.Ranks, ranks(8*i)) {
				t.Errorf("%s completed init on %v", h.Name, h.Ranks)
			}
		}
		// Each node lists its own stalled process only, and pkill there ends it.
		for _, a := range []string{addrA, addrB} {
			got := strings.Fields(key.run(t, a, "pgrep -f '[a]ll_reduce_perf' || true"))
			if len(got) != 1 {
				t.Errorf("%s: stalled processes %q, want the node's own one", a, got)
			}
		}
		for _, a := range []string{addrA, addrB} {
			key.run(t, a, "pkill -KILL -f '[a]ll_reduce_perf'; pkill -KILL -f '[o]rted'; true")
		}
		deadline := time.Now().Add(5 * time.Second)
		for _, a := range []string{addrA, addrB} {
			for {
				left := strings.TrimSpace(key.run(t, a, "pgrep -af '[a]ll_reduce_perf|[o]rted|[m]pirun' || true"))
				if left == "" {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("%s: still running after pkill: %s", a, left)
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		procs, err := ProcessesUsing("/proc", f.StateRoot(), f.simhost)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range procs {
			if strings.Contains(p.Cmdline, "all_reduce_perf") || strings.Contains(p.Cmdline, "mpirun") {
				t.Errorf("left on a host: %s", p)
			}
		}
	})

	t.Run("second-node-unreachable", func(t *testing.T) {
		out, rc := run("a-none", 60)
		if rc == 0 || !strings.Contains(out, "ssh: connect to host "+addrNone+" port 22: Connection refused") ||
			!strings.Contains(out, "ORTE was unable to reliably start one or more daemons.") || strings.Contains(out, "NCCL INFO") {
			t.Errorf("exit %d:\n%s", rc, out)
		}
	})
}
