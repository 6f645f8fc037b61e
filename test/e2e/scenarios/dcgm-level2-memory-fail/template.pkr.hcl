# dcgm-level2-memory-fail: DCGM's level-2 diagnostic fails the memory test on GPU 3 (knob
# dcgm-memory-fail); the host engine the check started must be stopped afterwards.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir

    dcgm_level = 2
  }
}
