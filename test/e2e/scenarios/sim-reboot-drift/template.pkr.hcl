# sim-reboot-drift: no dlami provisioner. Proves the simulation itself: real apt installs
# kernel 7.0.0-1015-aws from the local repo with holds intact, the reboot stand-in drops
# the connection and the host comes back on 1015, where the EFA/NVIDIA modules are missing.

build {
  sources = ["source.null.dlami"]

  provisioner "shell" {
    inline_shebang = "/bin/bash -e"
    inline = [
      "cat /proc/sys/kernel/random/boot_id > /var/tmp/boot_id.before",
      "sudo -n env DEBIAN_FRONTEND=noninteractive apt-get install -y -q linux-image-7.0.0-1015-aws",
      "test \"$(apt-mark showhold | grep -c .)\" -ge 10",
      "test \"$(readlink /boot/vmlinuz)\" = vmlinuz-7.0.0-1015-aws",
      "test \"$(uname -r)\" = 7.0.0-1014-aws",
      "sudo -n reboot",
    ]
    expect_disconnect = true
  }

  provisioner "shell" {
    pause_before   = "5s"
    inline_shebang = "/bin/bash -e"
    inline = [
      "echo \"after reboot: $(uname -r)\"; test \"$(uname -r)\" = 7.0.0-1015-aws",
      "! cmp -s /proc/sys/kernel/random/boot_id /var/tmp/boot_id.before",
      "! modinfo efa",
      "! nvidia-smi",
      "! dkms status | grep -q 7.0.0-1015-aws",
      "test ! -e /dev/gdrdrv",
    ]
  }
}
