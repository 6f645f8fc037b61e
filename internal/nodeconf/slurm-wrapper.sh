#!/bin/sh
# Slurm HealthCheckProgram (slurm.conf): the dlami node check in Slurm mode (packer-plugin-dlami).
exec /usr/local/sbin/dlami-node-check --mode slurm --config /etc/dlami-node-check/config.json
