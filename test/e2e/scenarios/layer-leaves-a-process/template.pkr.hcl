# layer-leaves-a-process: a layer starts work in the background and exits: a subshell that
# would install kernel 7.0.0-1015-aws a few seconds later (after the layer's drift check, while
# the host suite runs), and a sleeper under a name of its own, both with their output
# redirected so nothing holds the SSH session open. When the layer's script ends, the plugin
# stops what it left in its session: the build passes, the log names the leftovers, and
# nothing of them runs once Packer exited.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir

    layer {
      name = "leaves-a-process"
      inline = [
        "(sleep 2; apt-get install -y linux-image-7.0.0-1015-aws) </dev/null >/dev/null 2>&1 &",
        "bash -c 'exec -a dlami-leftover-sleeper sleep 600' </dev/null >/dev/null 2>&1 &",
        "echo LAYER-STARTED-ITS-LEFTOVERS",
      ]
    }
  }
}
