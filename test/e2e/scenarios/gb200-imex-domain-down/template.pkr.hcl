# gb200-imex-domain-down: as gb200-healthy, but nvidia-imex fails when the bake restarts it
# for the one-node domain (knob imex-start=failed: the daemon exits at once, as with an IMEX
# package that does not match the driver), so the domain never comes up: check imex fails,
# naming the failed unit, and the bake still puts nodes_config.cfg back (none left).

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir
    layer {
      name   = "imex-channel0"
      inline = ["mkdir -p /etc/modprobe.d", "echo 'options nvidia NVreg_CreateImexChannel0=1' >/etc/modprobe.d/nvidia-imex-channel0.conf"]
    }
  }
}
