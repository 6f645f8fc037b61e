# gb200-healthy: a p6e-gb200.36xlarge tray whose fabric registered (the simulated default:
# CliqueId 4026, one cluster UUID). imex defaults to "host" on this type, so the image must
# create IMEX channel 0 at boot: a layer adds the driver option, as a platform team's golden
# image does (NVIDIA's IMEX guide, imexchannels.html; Azure's GB200 image sets the same). The
# bake brings up a one-node IMEX domain (nodes_config.cfg holding only the tray's own address,
# nvidia-imex restarted; the stand-in reports it UP/READY) and imex passes; the image ships no
# nodes_config.cfg, and none is left after the bake (files_at_end).

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
