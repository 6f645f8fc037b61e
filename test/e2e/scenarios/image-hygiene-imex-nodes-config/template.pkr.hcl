# image-hygiene-imex-nodes-config: image_hygiene = true on the default p6-b200 host (imex is
# "off" there, so check imex judges nothing), and a layer leaves a real address in IMEX's node
# list (/etc/nvidia-imex/nodes_config.cfg) next to the placeholder. Every node's list must match
# and IMEX blocks the nodes a list does not name (grace-blackwell.md 1.5): image-hygiene's
# read-back fails the bake, naming the file and the address, whatever imex says.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir    = var.report_dir
    image_hygiene = true

    layer {
      name   = "imex-node-list"
      inline = ["mkdir -p /etc/nvidia-imex", "printf '0.0.0.0\\n10.9.8.7\\n' >/etc/nvidia-imex/nodes_config.cfg"]
    }
  }
}
