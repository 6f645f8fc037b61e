#!/bin/sh
# The one job script: both host implementations (internal/remote over SSH, internal/localhost
# for a node's check of itself) run a job and stop it with this file, embedded as host.JobScript.
#
#   job.sh run PIDFILE SCRIPT [WATCH]   run SCRIPT with /bin/sh as the leader of a new session
#   job.sh kill PIDFILE                 stop the session whose id PIDFILE holds
#
# A job is stopped by its session, not its process group: tools inside a job make groups of
# their own (timeout(1) does, around mpirun) and those must stop too. What called setsid itself
# (a daemon, a service systemd starts) has left the session and is not touched.
#
# run records the session id (the leader's pid) in PIDFILE and waits for the job. A watchdog
# stops the session when the process that started the job goes away: WATCH is its pid, or
# empty for the SSH session process this script runs under (sshd or sshd-session, found by
# walking up the parents). Nobody would read the job's output or stop it any more, and a hung
# NCCL test would hold the GPUs. A watched process that exited but was not collected by its
# parent yet (a zombie) counts as gone. The watchdog reads the session id as soon as the job
# wrote it, so removing the staging folder does not disarm it. When the job's script exits,
# whatever it left running in its session (`cmd &`, a subshell that sleeps and then runs
# apt-get) is named on stderr and stopped: it would change the image after the drift check
# that follows the job. The pid file is removed when the job ends, so a later kill cannot reach
# a process that reused the id. run exits with the script's exit status.
#
# kill: TERM to every process in the session, up to 3 s for them to go, then KILL. A missing
# or empty pid file means the job never started or already ended: not an error.
#
# Tools are called by absolute paths where it matters (setsid, kill): a job gets no login PATH.

# session_pids SID prints the live processes of session SID. The session id is the fourth field
# after the ")" that closes the command name in /proc/PID/stat (the name may hold spaces);
# zombies have already exited and only wait for their parent, so they are not listed.
session_pids() {
  want=$1
  for f in /proc/[0-9]*/stat; do
    { read -r st <"$f"; } 2>/dev/null || continue
    # shellcheck disable=SC2086 # split into stat's fields on purpose
    set -- ${st##*) }
    [ "${4:-}" = "$want" ] || continue
    [ "$1" = Z ] && continue
    p=${f#/proc/}
    echo "${p%/stat}"
  done
}

# stop_session SID: TERM to every process of the session, then KILL what is left after 3 s.
stop_session() {
  pids=$(session_pids "$1")
  [ -n "$pids" ] || return 0
  # shellcheck disable=SC2086 # one argument per pid
  /bin/kill -TERM $pids 2>/dev/null
  i=0
  while [ "$i" -lt 30 ]; do
    pids=$(session_pids "$1")
    [ -n "$pids" ] || return 0
    sleep 0.1
    i=$((i + 1))
  done
  # shellcheck disable=SC2086 # one argument per pid
  /bin/kill -KILL $pids 2>/dev/null
  return 0
}

# gone PID: the process has exited (or is a zombie waiting for its parent).
gone() {
  { read -r st <"/proc/$1/stat"; } 2>/dev/null || return 0
  case ${st##*) } in Z*|X*) return 0 ;; esac
  return 1
}

# read_session PIDFILE prints the session id the file holds, or nothing.
read_session() {
  g=$(cat "$1" 2>/dev/null) || return 0
  case $g in ''|*[!0-9]*) return 0 ;; esac
  echo "$g"
}

run_job() {
  pidfile=$1 script=$2 watch=${3:-}
  if [ -z "$watch" ]; then
    # The SSH session process this script runs under.
    s=$$
    while [ "$s" -gt 1 ]; do
      read -r _ c _ p _ <"/proc/$s/stat" || break
      case $c in "(sshd)"|"(sshd-session)") break ;; esac
      s=$p
    done
    watch=$s
  fi
  case $watch in ''|*[!0-9]*) watch=0 ;; esac
  set=/usr/bin/setsid; [ -x "$set" ] || set=setsid
  # shellcheck disable=SC2016 # $$ and $1/$2 belong to the inner shell
  "$set" -w /bin/sh -c 'echo $$ >"$1" && exec /bin/sh "$2"' dlami-job "$pidfile" "$script" &
  job=$!
  if [ "$watch" -gt 1 ]; then
    (
      g=
      while kill -0 "$job" 2>/dev/null; do
        [ -n "$g" ] || g=$(read_session "$pidfile")
        if gone "$watch"; then
          [ -z "$g" ] || stop_session "$g"
          exit 0
        fi
        if [ -z "$g" ]; then sleep 0.1; else sleep 1; fi
      done
    ) </dev/null >/dev/null 2>&1 &
  fi
  wait "$job"
  rc=$?
  g=$(read_session "$pidfile")
  [ -n "$g" ] || g=$job
  left=$(session_pids "$g")
  if [ -n "$left" ]; then
    echo "dlami: the job ended and left processes running in its session; stopping them:" >&2
    for p in $left; do
      c=$({ tr '\000' ' ' <"/proc/$p/cmdline"; } 2>/dev/null)
      echo "dlami:   pid $p: ${c:-?}" >&2
    done
    stop_session "$g"
  fi
  rm -f "$pidfile"
  exit "$rc"
}

kill_job() {
  g=$(read_session "$1")
  [ -z "$g" ] || stop_session "$g"
  exit 0
}

case ${1:-} in
  run) shift; run_job "$@" ;;
  kill) shift; kill_job "$@" ;;
  *) echo "dlami job script: usage: run PIDFILE SCRIPT [WATCH] | kill PIDFILE" >&2; exit 2 ;;
esac
