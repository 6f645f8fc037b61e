# journal-storage-none: a healthy host whose journald keeps no journal (knob journal-storage
# none: journald.conf Storage=none). dmesg still shows the boot's kernel lines, without an
# Xid, but what a layer cleared from the ring buffer (dmesg -c) or what overflowed it could not
# be seen: the xid check warns (never passes) and says how to keep the kernel log in the
# journal. A warning does not fail the build.

build {
  sources = ["source.null.dlami"]

  provisioner "dlami" {
    report_dir = var.report_dir
  }
}
