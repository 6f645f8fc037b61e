package amitags

import (
	"maps"
	"os"
	"sort"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
)

// Version tags: what a verified AMI carries so that a fleet can pick or hold AMIs by driver
// and stack (awslabs/amazon-eks-ami#2417, #1339: driver version control), all from the bill of
// materials. A tag is set only when the bill of materials records the version: never a guess.
const (
	NvidiaDriver = "dlami:nvidia_driver"
	// NvidiaDriverBranch is the driver's major version ("595"): NVIDIA's branch.
	NvidiaDriverBranch = "dlami:nvidia_driver_branch"
	// CUDADriver is the CUDA version the driver supports (nvidia-smi's header).
	CUDADriver       = "dlami:cuda_driver"
	ContainerToolkit = "dlami:nvidia_container_toolkit"
	EFAInstaller     = "dlami:efa_installer"
	AWSOFINCCL       = "dlami:aws_ofi_nccl"
	// NCCL is the NCCL version the bake's NCCL test ran with.
	NCCL   = "dlami:nccl"
	IMEX   = "dlami:nvidia_imex"
	Kernel = "dlami:kernel"
)

// VersionTags computes the version tags of an image from its bill of materials.
func VersionTags(b bom.BOM) map[string]string {
	tags := map[string]string{}
	put := func(key, v string) {
		if v = strings.TrimSpace(v); v != "" {
			tags[key] = v
		}
	}
	c := b.Components
	put(NvidiaDriver, c["nvidia_driver"])
	if d := c["nvidia_driver"]; d != "" {
		branch, _, _ := strings.Cut(d, ".")
		put(NvidiaDriverBranch, branch)
	}
	put(CUDADriver, c["cuda_driver"])
	put(EFAInstaller, c["efa_installer"])
	put(AWSOFINCCL, c["aws_ofi_nccl"])
	put(ContainerToolkit, c["nvidia_container_toolkit"])
	put(IMEX, c["nvidia_imex"])
	// Packages the guard watched: the toolkit and IMEX when a policy includes them.
	names := make([]string, 0, len(b.Guarded))
	for n := range b.Guarded {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		switch {
		case n == "nvidia-container-toolkit" && tags[ContainerToolkit] == "":
			put(ContainerToolkit, b.Guarded[n].Version)
		case (n == "nvidia-imex" || strings.HasPrefix(n, "nvidia-imex-")) && tags[IMEX] == "":
			put(IMEX, b.Guarded[n].Version)
		}
	}
	if b.NCCL != nil {
		put(NCCL, b.NCCL.NCCLVersion)
	}
	put(Kernel, b.Kernel)
	return tags
}

// WithVersions adds the version tags of the bill of materials at bomFile (the provisioner's
// local copy, the post-processor's bom_file) to tags; an unreadable or absent file adds none.
func WithVersions(tags map[string]string, bomFile string) map[string]string {
	if bomFile == "" {
		return tags
	}
	data, err := os.ReadFile(bomFile)
	if err != nil {
		return tags
	}
	b, err := bom.Decode(data)
	if err != nil {
		return tags
	}
	out := maps.Clone(tags)
	maps.Copy(out, VersionTags(b))
	return out
}
