# site-checks: site_checks_dir installs the site's own executables into the image and runs them
# as root in the host phase: exit 0 passes, 2 warns. Each is a check of its own, site:<name>,
# in every report; the last line it prints is its message.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir      = var.report_dir
    site_checks_dir = "site-checks"
  }
}
