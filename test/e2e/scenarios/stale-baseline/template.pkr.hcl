# stale-baseline: the image already carries /var/lib/dlami-bake/baseline.json from an earlier
# bake on another host (a baseline the plugin wrote on this simulated host, edited to an older
# DLAMI: kernel 7.0.0-1013-aws, driver 580.95.05, taken 2026-09-14). A new build must take a
# fresh baseline of the host it runs on, never judge against the old one: pass.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir
  }

  # The bill of materials describes this host, not the earlier bake's.
  provisioner "shell" {
    inline = ["grep -o '\"kernel\": *\"[^\"]*\"' /etc/dlami-bake/manifest.json | head -n 1 | sed 's/.*: *\"/BOM kernel=/; s/\"$//'"]
  }
}
