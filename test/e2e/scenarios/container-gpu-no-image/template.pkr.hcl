# container-gpu-no-image: the provisioner's defaults, no container_check: the toolkit and the
# engines' configuration are judged and fine, but no container can start without a local image
# (the check never pulls). container-gpu must warn "not judged: no local image", naming the
# setting, and must not be counted as passed.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir
  }
}
