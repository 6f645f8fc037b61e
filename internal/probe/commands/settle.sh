#!/bin/sh
# Waits for the first boot to settle: cloud-init done (its per-instance and per-boot scripts
# ran), then no apt, dpkg or unattended-upgrade process left. Prints cloud-init's final status
# line (packer-plugin-dlami, facts.Settle).
ci=/usr/bin/cloud-init
if [ -x "$ci" ]; then "$ci" status --wait >/dev/null 2>&1; fi
while pgrep -x 'apt|apt-get|dpkg|unattended-upgr|unattended-upgrade' >/dev/null 2>&1; do sleep 2; done
if [ -x "$ci" ]; then "$ci" status 2>&1 | head -n 1; else echo "status: no cloud-init"; fi
