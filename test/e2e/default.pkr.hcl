# Default build of test/e2e/run-scenario: the dlami provisioner with its defaults against the
# simulated host (source.null.dlami and the variables are in host.pkr.hcl).

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir
  }
}
