# preexisting-unhold-required: the image does not hold linux-aws and the running kernel's image;
# with require_holds = true the guard fails on it, before any layer runs.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    require_holds = true
    report_dir = var.report_dir

    layer {
      name   = "must-not-run"
      inline = ["echo \"LAYER-$(echo DID)-RUN\""]
    }
  }
}
