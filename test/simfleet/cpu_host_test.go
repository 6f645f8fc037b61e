package simfleet

import (
	"context"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
)

// TestFleetCPUInstance: an instance of a CPU type (the build instance of a two-phase bake,
// issue 21) boots the same DLAMI image without its GPU hardware: no NVIDIA GPU (nvidia-smi
// fails as on a real CPU instance, no NVIDIA function on the PCI bus, no NVIDIA module
// loaded), no EFA device, no local NVMe, while the packages, the module files and the holds
// are the GPU instance's.
func TestFleetCPUInstance(t *testing.T) {
	f := hostFleet(t)
	ctx := context.Background()
	key := newKeyPair(t)
	const probe = `cat /sys/devices/virtual/dmi/id/product_name
n=0; for d in /sys/bus/pci/devices/*; do [ "$(cat $d/vendor)" = 0x10de ] && [ "$(cat $d/class)" = 0x030200 ] && n=$((n+1)); done; echo "gpus-on-pci=$n"
echo "rdma=$(ls /sys/class/infiniband 2>/dev/null | wc -l)"
echo "nvidia-module=$(test -d /sys/module/nvidia && echo loaded || echo absent)"
echo "efa-module=$(test -d /sys/module/efa && echo loaded || echo absent)"
nvidia-smi -L >/dev/null 2>&1; echo "nvidia-smi=$?"
echo "holds=$(apt-mark showhold | sort | tr '\n' ' ')"
echo "packages=$(dpkg-query -W -f '${Package}=${Version}\n' | sort | md5sum | cut -c1-12)"
echo "modules=$(ls /lib/modules/*/updates/dkms 2>/dev/null | sort | tr '\n' ' ')"
`
	boot := func(id, typ string) map[string]string {
		t.Helper()
		if err := f.Start(ctx, awsfake.MachineSpec{InstanceID: id, InstanceType: typ, Address: addrA, AuthorizedKey: key.line}); err != nil {
			t.Fatal(err)
		}
		out := key.run(t, addrA, probe)
		if err := f.Terminate(ctx, id); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		got := map[string]string{"product_name": lines[0]}
		for _, l := range lines[1:] {
			k, v, _ := strings.Cut(l, "=")
			got[k] = v
		}
		return got
	}
	cpu := boot("i-0ccccccccccccccc1", "c7i.8xlarge")
	gpu := boot("i-0ccccccccccccccc2", "p5.48xlarge")
	t.Logf("c7i.8xlarge: %v", cpu)
	t.Logf("p5.48xlarge: %v", gpu)
	for k, want := range map[string]string{"product_name": "c7i.8xlarge", "gpus-on-pci": "0", "rdma": "0", "nvidia-module": "absent", "efa-module": "absent", "nvidia-smi": "9"} {
		if cpu[k] != want {
			t.Errorf("c7i.8xlarge: %s = %q, want %q", k, cpu[k], want)
		}
	}
	for k, want := range map[string]string{"gpus-on-pci": "8", "nvidia-module": "loaded", "efa-module": "loaded", "nvidia-smi": "0"} {
		if gpu[k] != want {
			t.Errorf("p5.48xlarge: %s = %q, want %q", k, gpu[k], want)
		}
	}
	for _, k := range []string{"holds", "packages", "modules"} {
		if cpu[k] != gpu[k] || cpu[k] == "" {
			t.Errorf("%s differ between the CPU and the GPU instance of one image: %q vs %q", k, cpu[k], gpu[k])
		}
	}
	if !strings.Contains(cpu["holds"], "linux-aws") {
		t.Errorf("holds on the CPU instance %q: want the DLAMI's", cpu["holds"])
	}
	assertGone(t, f, f.StateRoot()+"/instances")
}
