# arch-arm64-ami-on-x86-host: an arm64 DLAMI (expect.architecture, from the data source) baked on the default x86_64 p6-b200.48xlarge host. The bake fails before
# the guard and any layer run, naming the setting (engine checkPlatform, issue 35).

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir
    expect {
      architecture = "arm64"
    }
    layer {
      name   = "never"
      inline = ["echo LAYER-NEVER-$((6*7))-RAN"]
    }
  }
}
