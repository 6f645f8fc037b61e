# smoke-dlami: the smallest use of the dlami provisioner: guard only, no layer, no validation.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir
    validate   = false
  }
}
