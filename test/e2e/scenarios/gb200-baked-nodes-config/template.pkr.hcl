# gb200-baked-nodes-config: as gb200-healthy, but a layer bakes a real address into IMEX's node
# list (/etc/nvidia-imex/nodes_config.cfg), as a prolog run on the build instance would leave
# it. Every node's list must match and IMEX blocks the nodes a list does not name
# (grace-blackwell.md 1.5), so check imex fails naming the file and the address; the one-node
# domain still comes up, and the bake puts the file back byte for byte (files_at_end).

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir
    layer {
      name = "imex-channel0-and-node-list"
      inline = [
        "mkdir -p /etc/modprobe.d /etc/nvidia-imex",
        "echo 'options nvidia NVreg_CreateImexChannel0=1' >/etc/modprobe.d/nvidia-imex-channel0.conf",
        "printf '10.9.8.7\\n' >/etc/nvidia-imex/nodes_config.cfg",
      ]
    }
  }
}
