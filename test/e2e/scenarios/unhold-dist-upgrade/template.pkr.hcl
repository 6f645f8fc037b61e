# unhold-dist-upgrade: a careless layer lifts every hold and dist-upgrades; real apt pulls
# linux-aws 7.0.0.1015.15 and kernel 7.0.0-1015-aws from the local repo.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir

    layer {
      name = "careless-dist-upgrade"
      inline = [
        "apt-mark unhold $(apt-mark showhold)",
        "apt-get update -q",
        "apt-get -y dist-upgrade",
      ]
    }

    layer {
      name   = "never-runs"
      inline = ["echo \"LAYER-$(echo AFTER)-DRIFT-RAN\""]
    }
  }
}
