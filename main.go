// Command packer-plugin-dlami is the Packer plugin binary: the `dlami` data source resolves and
// verifies the AWS Deep Learning Base OSS DLAMI, the `dlami` provisioner layers software on it
// while guarding the kernel and driver packages, then validates the host and runs a 1-node NCCL
// test, and the `dlami` post-processor checks the first boot of the AMI the build registered.
package main

import (
	"fmt"
	"os"

	"github.com/hashicorp/packer-plugin-sdk/plugin"

	dlamiData "github.com/dlami-bake/packer-plugin-dlami/datasource/dlami"
	dlamiPP "github.com/dlami-bake/packer-plugin-dlami/postprocessor/dlami"
	dlamiProv "github.com/dlami-bake/packer-plugin-dlami/provisioner/dlami"
	"github.com/dlami-bake/packer-plugin-dlami/version"
)

func main() {
	pps := plugin.NewSet()
	pps.RegisterDatasource(plugin.DEFAULT_NAME, new(dlamiData.Datasource))
	pps.RegisterProvisioner(plugin.DEFAULT_NAME, new(dlamiProv.Provisioner))
	pps.RegisterPostProcessor(plugin.DEFAULT_NAME, new(dlamiPP.PostProcessor))
	pps.SetVersion(version.PluginVersion)
	if err := pps.Run(); err != nil {
		fmt.Fprintln(os.Stderr, err.Error())
		os.Exit(1)
	}
}
