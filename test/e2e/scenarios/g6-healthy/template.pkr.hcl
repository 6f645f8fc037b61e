# g6-healthy: a g6.xlarge, whose single L4 (an x16 card) sits in an x8 slot by design
# (internal/profile: aws-k8s-tester dcgm-diag.yaml, aws-parallelcluster-cookbook PR #2803):
# pcie-link passes at the slot's x8, citing the profile. DCGM is off here until the engine
# tells DCGM's pcie test the slot's width (probe.DCGMScriptWith, checks.Target.SlotPCIeWidth):
# at its default min_pci_width of 16 DCGM fails the L4 with DCGM_FR_PCIE_WIDTH, as on AWS.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir

    dcgm_level = 0
  }
}
