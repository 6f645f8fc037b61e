# site-check-fails: a site check that exits 1 fails the bake like any check, named by its id;
# one that exits with a status that is no verdict (3) fails too: it did not judge.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir      = var.report_dir
    site_checks_dir = "site-checks"
  }
}
