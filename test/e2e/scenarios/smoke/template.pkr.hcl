# smoke: Packer's null builder reaches the simulated host over SSH; one trivial use of
# each simulated component through plain shell/file provisioners (no dlami plugin needed).

build {
  sources = ["source.null.dlami"]

  provisioner "file" {
    content     = "hello from packer\n"
    destination = "/tmp/smoke-upload.txt"
  }

  provisioner "shell" {
    inline_shebang = "/bin/bash -e"
    inline = [
      "set -eu",
      "test \"$(cat /tmp/smoke-upload.txt)\" = 'hello from packer'",
      "echo \"kernel: $(uname -r)\"; test \"$(uname -r)\" = 7.0.0-1014-aws",
      "sudo -n true && echo 'sudo: ok'",
      "test \"$(id -un)\" = ubuntu",
      "test \"$(cat /sys/devices/virtual/dmi/id/product_name)\" = p6-b200.48xlarge",
      "nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv,noheader",
      "test \"$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)\" = 8",
      "nvidia-smi | grep -q 'Driver Version: 595.91.07'",
      "test \"$(systemctl is-active nvidia-fabricmanager)\" = active",
      "test \"$(modinfo -F version efa)\" = 3.3.0",
      "test \"$(modinfo -F version nvidia)\" = 595.91.07",
      "test \"$(modinfo -F version lustre)\" = 2.15.6",
      "head -3 /opt/amazon/efa_installed_packages | grep -q 'EFA installer version: 1.50.0'",
      "test \"$(ls -1 /sys/class/infiniband/ | grep -c rdmap)\" = 8",
      "test \"$(cat /sys/class/infiniband/ibp115s0f0/ports/1/state)\" = '1: DOWN'",
      "test \"$(/opt/amazon/efa/bin/fi_info -p efa -t FI_EP_RDM | grep domain | sort -u | wc -l)\" = 8",
      "/opt/amazon/efa/bin/fi_info --version | grep -q 'libfabric: 2.6.0'",
      "lsmod | grep -q '^gdrdrv '",
      "test \"$(stat -c %F /dev/gdrdrv)\" = 'character special file'",
      "test \"$(ulimit -l)\" = unlimited",
      "findmnt -n -o TARGET,SOURCE,FSTYPE,SIZE --mountpoint /opt/dlami/nvme",
      "test \"$(lfs --version)\" = 'lfs 2.15.6'",
      "! dmesg >/dev/null 2>&1 # dmesg_restrict=1 as on Ubuntu 24.04",
      "sudo dmesg | grep -q 'NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  595.91.07'",
      "dkms status | grep -q 'efa/3.3.0, 7.0.0-1014-aws, x86_64: installed'",
      "apt-mark showhold | grep -qx linux-aws",
      "out=$(/opt/amazon/openmpi/bin/mpirun -n 8 --bind-to none -x NCCL_DEBUG=INFO /usr/local/cuda-13.2/efa/test-cuda-13.2/all_reduce_perf -b 8 -e 1G -f 2 -g 1 -c 1 -n 50)",
      "grep -q 'Out of bounds values : 0 OK' <<<\"$out\"",
      "grep -q 'NET/OFI Selected Provider is efa (found 8 nics)' <<<\"$out\"",
      "grep -E '^ +1073741824 ' <<<\"$out\"",
      "echo smoke: all components answered",
    ]
  }
}
