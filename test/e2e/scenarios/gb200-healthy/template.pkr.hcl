# gb200-healthy: a p6e-gb200.36xlarge tray whose fabric registered (the simulated default:
# CliqueId 4026, one cluster UUID). imex defaults to "host" on this type, so the image must
# create IMEX channel 0 at boot: a layer adds the driver option, as a platform team's golden
# image does (NVIDIA's IMEX guide, imexchannels.html; Azure's GB200 image sets the same). The
# IMEX domain itself is not judged in a one-tray bake (the service is inactive until
# nodes_config.cfg holds the domain's addresses): imex warns, saying so.

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
