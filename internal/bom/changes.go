package bom

import (
	"fmt"
	"slices"
	"sort"

	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// changeOrder are the components a rebake is read by, first: the kernel, the driver, CUDA,
// NCCL, EFA and the container toolkit (the rest of the components and the guarded packages
// follow by name).
var changeOrder = []string{"kernel", "next_boot_kernel", "nvidia_driver", "cuda_driver", "nccl", "fabricmanager",
	"efa_installer", "efa_driver", "libfabric", "aws_ofi_nccl", "nvidia_container_toolkit", "nvidia_imex", "gdrcopy", "lustre"}

// absent stands for a side that lacks the component.
const absent = "(absent)"

// Changes is what changed from prev to cur: each component (kernel, the host's components,
// the NCCL version) and each guarded package whose version differs, one side absent
// included. from names prev for a person (the file it was read from).
func Changes(prev, cur BOM, from string) result.Changes {
	before, after := versions(prev), versions(cur)
	keys := make([]string, 0, len(before)+len(after))
	for k := range before {
		keys = append(keys, k)
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			keys = append(keys, k)
		}
	}
	rank := func(k string) int {
		if i := slices.Index(changeOrder, k); i >= 0 {
			return i
		}
		return len(changeOrder)
	}
	sort.Slice(keys, func(i, j int) bool {
		if ri, rj := rank(keys[i]), rank(keys[j]); ri != rj {
			return ri < rj
		}
		return keys[i] < keys[j]
	})
	out := result.Changes{Previous: fmt.Sprintf("the bill of materials of %s made %s by plugin %s (%s)", prev.BuildName, prev.GeneratedAt.UTC().Format("2006-01-02 15:04 UTC"), prev.PluginVersion, from),
		Compared: len(keys), Items: []result.Change{}}
	for _, k := range keys {
		b, a := before[k], after[k]
		if b == a {
			continue
		}
		out.Items = append(out.Items, result.Change{Component: k, Before: orAbsent(b), After: orAbsent(a)})
	}
	return out
}

func orAbsent(v string) string {
	if v == "" {
		return absent
	}
	return v
}

// versions are a BOM's versions by name: the kernels, the components (instance facts such as
// GPU and PCI counts left out: they say where the bake ran, not what it baked), NCCL, and
// each guarded package as "package <name>" (with ", not held" when it was not on hold).
func versions(b BOM) map[string]string {
	m := map[string]string{}
	put := func(k, v string) {
		if v != "" {
			m[k] = v
		}
	}
	put("kernel", b.Kernel)
	put("next_boot_kernel", b.NextBootKernel)
	for k, v := range b.Components {
		switch k {
		case "instance_type", "gpu_count", "gpu_model", "nvidia_kmod_license":
			continue
		}
		if len(k) > 4 && k[:4] == "pci_" {
			continue
		}
		put(k, v)
	}
	if b.NCCL != nil {
		put("nccl", b.NCCL.NCCLVersion)
	}
	for name, p := range b.Guarded {
		v := p.Version
		if !p.Held {
			v += ", not held"
		}
		put("package "+name, v)
	}
	return m
}
