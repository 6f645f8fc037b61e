# arch-x86-ami-on-gb200: an x86_64 DLAMI baked on an arm64 GB200 tray (uname -m aarch64). The bake fails before
# the guard and any layer run, naming the setting (engine checkPlatform, issue 35).

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir
    expect {
      architecture = "x86_64"
    }
    layer {
      name   = "never"
      inline = ["echo LAYER-NEVER-$((6*7))-RAN"]
    }
  }
}
