# The healthy bake of the healthy-<packaging>-<holds> scenarios: the same bake on each of the
# DLAMI layouts nobody public can confirm (how the NVIDIA driver is packaged: nvidia-repo,
# ubuntu-archive or runfile; which packages the image holds: seed, metas-only or none; the
# knobs in each scenario's rootfs, dlami-facts.md "Unconfirmed"). Each must pass: unheld
# guarded packages are a warning, not a failure. The layer prints the layout it ran on.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir

    layer {
      name = "tools"
      inline = [
        "apt-get install -y -q jq",
        "jq --version",
        "bash -c 'echo \"layout: $(cat /var/lib/dlami-sim/first-boot.done 2>/dev/null || echo nvidia-packaging=nvidia-repo holds=seed)\"; echo \"holds: $(apt-mark showhold | tr \"\\n\" \" \")\"; dkms status; nvidia-smi --query-gpu=driver_version --format=csv,noheader | sort -u'",
      ]
    }
  }
}
