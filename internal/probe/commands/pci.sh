#!/bin/sh
# "<address> <vendor> <device> <class>" per PCI function from sysfs with shell builtins only: no
# lspci dependency and no fork per device (packer-plugin-dlami, the PCI section).
for d in /sys/bus/pci/devices/*; do
  [ -r "$d/vendor" ] || continue
  read -r v <"$d/vendor" && read -r i <"$d/device" && read -r c <"$d/class" || exit 1
  echo "${d##*/} $v $i $c"
done
