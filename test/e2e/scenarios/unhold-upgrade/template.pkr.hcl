# unhold-upgrade: a careless layer lifts every hold and runs `apt-get -y upgrade`. Real apt
# keeps linux-aws back (its new version needs new packages), so the drift is the lifted
# holds; unhold-dist-upgrade shows the same layer with dist-upgrade pulling kernel 1015.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir

    layer {
      name = "careless-upgrade"
      inline = [
        "apt-mark unhold $(apt-mark showhold)",
        "apt-get update -q",
        "apt-get -y upgrade",
      ]
    }

    layer {
      name   = "never-runs"
      inline = ["echo \"LAYER-$(echo AFTER)-DRIFT-RAN\""]
    }
  }
}
