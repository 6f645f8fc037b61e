# preexisting-unhold: the host's kernel packages were unheld before the bake (see ./prepare): the
# image does not hold them, so the guard warns, watches them all the same, and the bake goes on.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir

    layer {
      name   = "must-not-run"
      inline = ["echo \"LAYER-$(echo DID)-RUN\""]
    }
  }
}
