# skip-and-warn-checks: nvidia-smi lists 7 of the 8 GPUs on the PCI bus. warn_checks names the
# checks that count the GPUs (gpu, gpu-memory, nvlink): their failures are reported as warnings
# that say so, and the bake goes on; skip_checks reports lustre and dcgm skipped, naming the
# setting, and DCGM's diagnostics never run. The NCCL test is off (a 7-GPU host is not a test
# of it).

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir  = var.report_dir
    skip_checks = ["lustre", "dcgm"]
    warn_checks = ["gpu", "gpu-memory", "nvlink"]
    nccl {
      skip = true
    }
  }
}
