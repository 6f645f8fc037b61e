# image-hygiene: image_hygiene = true on the only dlami provisioner. After the bill of materials
# it removes the key Packer logged in with (ssh_private_key_file's public key) from ubuntu's
# authorized_keys, the SSH host keys, the machine id, cloud-init's instance state, logs and
# history, and the image-hygiene check reads them back as root. The bake still finishes over the
# SSH connection it already has (its staging folder removed, the reports downloaded).

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir    = var.report_dir
    image_hygiene = true

    layer {
      name   = "history-and-logs"
      inline = ["echo 'apt-get install secret-tool' >/root/.bash_history", "echo build >/var/log/dlami-layer.log"]
    }
  }
}
