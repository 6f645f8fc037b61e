#!/bin/sh
# Stand-in for the NVIDIA driver's /usr/bin/nvidia-bug-report.sh on the simulated host
# (test/fleetengines): like the real script it takes --output-file FILE and writes one gzipped
# log, FILE.gz (NVIDIA GPU Debug Guidelines; the script's usage()), here from the simulation's
# own nvidia-smi -q and dmesg. Only the interface is NVIDIA's.
out=nvidia-bug-report.log
while [ $# -gt 0 ]; do
	case $1 in
	--output-file) out=$2; shift ;;
	esac
	shift
done
[ "$(id -u)" = 0 ] || { echo "ERROR: Please run $(basename "$0") as root." >&2; exit 1; }
{
	echo "nvidia-bug-report.sh stand-in (test/fleetengines)"
	echo "____________________________________________"
	/usr/bin/nvidia-smi -q
	echo "____________________________________________"
	/usr/bin/dmesg
} | /bin/gzip -c >"$out.gz"
echo "Complete. The output file is $out.gz"
