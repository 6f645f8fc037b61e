# shellcheck shell=sh
# Installed by the EFA installer's efa-profile package (the installer log says
# "efa-profile is verified to install /etc/profile.d/zippy_efa.sh"). Login shells
# only: a non-interactive SSH command (what Packer runs) does not read it, so a
# bare `fi_info` is not found there; use /opt/amazon/efa/bin/fi_info.
PATH=/opt/amazon/openmpi/bin:/opt/amazon/efa/bin:$PATH
