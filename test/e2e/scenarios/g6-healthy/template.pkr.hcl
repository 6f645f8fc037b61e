# g6-healthy: a g6.xlarge, whose single L4 (an x16 card) sits in an x8 slot by design
# (internal/profile: aws-k8s-tester dcgm-diag.yaml, aws-parallelcluster-cookbook PR #2803):
# pcie-link passes at the slot's x8, citing the profile, and DCGM's pcie test is told the slot's
# width (min_pci_width 8), as AWS's own suites do: at its default of 16 it would fail the L4
# with DCGM_FR_PCIE_WIDTH.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir
  }
}
