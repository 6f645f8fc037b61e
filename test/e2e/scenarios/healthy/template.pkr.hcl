# healthy: a clean bake on the validated P6-B200 host; a layer installs a real Debian
# package (jq) through real apt; guard + full validation + NCCL pass.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir

    layer {
      name         = "tools"
      apt_packages = ["jq"]
      # A secret in a layer's environment reaches the commands but never a log or report.
      environment = { API_TOKEN = "s3cr3t-value-never-logged" }
      inline      = ["jq --version", "test \"$${#API_TOKEN}\" -eq 25 && echo TOKEN-ARRIVED"]
    }
  }

  # The bill of materials travels inside the image.
  provisioner "shell" {
    inline = ["jq -r '\"BOM kernel=\" + .components.kernel' /etc/dlami-bake/manifest.json"]
  }
}
