#!/bin/sh
# The memlock limits a login starts from where no limits file sets them: PID 1's (Debian's and
# Ubuntu's pam_limits initialise every limit from /proc/1/limits) and the SSH daemon's
# (upstream pam_limits keeps what the session inherited). The daemon is the topmost sshd above
# this shell, else the one /run/sshd.pid names (packer-plugin-dlami, facts.LoginMemlock).
sed -n 's/^Max locked memory[[:space:]]*/init /p' /proc/1/limits || exit 1
p=$$ top=
while [ "${p:-0}" -gt 1 ] 2>/dev/null; do
  [ "$(cat "/proc/$p/comm" 2>/dev/null)" = sshd ] && top=$p
  p=$(sed -n 's/^PPid:[[:space:]]*//p' "/proc/$p/status" 2>/dev/null)
done
if [ -z "$top" ] && [ -r /run/sshd.pid ]; then read -r top </run/sshd.pid; fi
case $top in
'') ;;
*[!0-9]*) echo "sshd pid file holds $top" >&2; exit 1 ;;
*) sed -n "s/^Max locked memory[[:space:]]*/sshd $top /p" "/proc/$top/limits" || exit 1 ;;
esac
