# ssh-drop-mid-check: the SSH connection dies during the host checks; the read-only bundle is
# run again and the bake completes with the right verdicts.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir
  }

  # Proves the drop happened (the stand-in records it on the host).
  provisioner "shell" {
    inline = ["cat /tmp/dlami-sim-ssh-dropped"]
  }
}
