#!/usr/bin/env bash
# The interop gate (contract §14.1): launch an OpenEnv oracle inventory, wait for health,
# export the URL variables and run the interop suite tests/gate against it.
#
#   bash scripts/check_miniopenenv_interop.sh [PYTEST ARGS...]
#
# Without OPENENV_INTEROP_ROOT it serves this project's own oracle (23 servers through
# `kiln-verify oracle serve`). With OPENENV_INTEROP_ROOT set to a checkout of the C99
# miniopenenv oracle, the inventory comes from that checkout's make database
# (ARCADE_GAMES, ARCADE_TASKS, ARCADE_MATH), every server is rebuilt with make (a cached
# binary is never trusted) and launched as build/rel/bin/NAME.
#
# Environment:
#   OPENENV_INTEROP_ROOT           external oracle checkout (unset: our own oracle)
#   KILN_OPENENV_INTEROP_PORT      base port, server i listens on base + i (default 18990)
#   KILN_OPENENV_INTEROP_HEALTH_ATTEMPTS   /health polls per server, 50 ms apart (default 100)
#   KILN_OPENENV_INTEROP_LAUNCH_BATCH      servers started at once (default: CPU count)
#   PYTHON                         interpreter running the suite (default: the repo's .venv)
#   KILN_VERIFY                    the kiln-verify command (default: next to PYTHON, or PATH)
#   MAKE                           make program for the external root (default make)
#
# Every server is stopped on every exit path (normal exit, failure, INT, TERM).
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"

base_port="${KILN_OPENENV_INTEROP_PORT:-18990}"
health_attempts="${KILN_OPENENV_INTEROP_HEALTH_ATTEMPTS:-100}"
make_cmd="${MAKE:-make}"

if [ -z "${PYTHON:-}" ]; then
  if [ -x "$repo/.venv/bin/python" ]; then
    PYTHON="$repo/.venv/bin/python"
  else
    PYTHON="$(command -v python3 || command -v python)"
  fi
fi

case "$base_port" in
  '' | *[!0-9]*)
    echo "error: KILN_OPENENV_INTEROP_PORT must be a port number, got '$base_port'" >&2
    exit 2
    ;;
esac
case "$health_attempts" in
  '' | *[!0-9]*)
    echo "error: KILN_OPENENV_INTEROP_HEALTH_ATTEMPTS must be a count, got '$health_attempts'" >&2
    exit 2
    ;;
esac

workdir="$(mktemp -d "${TMPDIR:-/tmp}/kiln-interop.XXXXXX")"
pids=()
suite_pid=""

stop_servers() {
  local pid
  for pid in "${pids[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  # Give each server up to ~5 s to stop cleanly, then kill it.
  local tries=0
  for pid in "${pids[@]}"; do
    while kill -0 "$pid" 2>/dev/null && [ "$tries" -lt 100 ]; do
      sleep 0.05
      tries=$((tries + 1))
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  pids=()
}

on_exit() {
  local status=$?
  trap - EXIT INT TERM
  if [ -n "$suite_pid" ]; then
    kill -TERM "$suite_pid" 2>/dev/null || true
    wait "$suite_pid" 2>/dev/null || true
  fi
  stop_servers
  rm -rf "$workdir"
  exit "$status"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

fail() {
  echo "error: $*" >&2
  exit 1
}

# ---- inventory -------------------------------------------------------------------------

make_variable() {
  # The value of one variable from the checkout's make database (`make -pn`). A recursive
  # variable appears there unexpanded; then make itself is asked to expand it.
  local name="$1" database="$2" value
  value="$(sed -n -E "s/^${name}[[:space:]]*(:{0,3}|[?+!]?)=[[:space:]]*//p" "$database" | tail -n 1)"
  if [[ "$value" == *'$'* ]]; then
    # The single quotes are deliberate: `$($*)` is make syntax, expanded by make, not bash.
    # shellcheck disable=SC2016
    value="$("$make_cmd" -s --no-print-directory -C "$root" \
      --eval '__kiln_interop_print_%: ; @printf "%s\n" "$($*)"' "__kiln_interop_print_$name")"
  fi
  printf '%s\n' "$value"
}

names=()
math=()
if [ -n "${OPENENV_INTEROP_ROOT:-}" ]; then
  root="$OPENENV_INTEROP_ROOT"
  [ -d "$root" ] || fail "OPENENV_INTEROP_ROOT is not a directory: $root"
  root="$(cd "$root" && pwd)"
  database="$workdir/make-database.txt"
  if ! "$make_cmd" -C "$root" -pn >"$database" 2>"$workdir/make-database.err"; then
    # `make -pn` exits non-zero without a default goal; the database is still printed.
    [ -s "$database" ] || { cat "$workdir/make-database.err" >&2; fail "make -pn failed in $root"; }
  fi
  games_value="$(make_variable ARCADE_GAMES "$database")"
  tasks_value="$(make_variable ARCADE_TASKS "$database")"
  math_value="$(make_variable ARCADE_MATH "$database")"
  read -r -a games <<<"$games_value" || true
  read -r -a tasks <<<"$tasks_value" || true
  read -r -a math <<<"$math_value" || true
  [ "${#games[@]}" -gt 0 ] || fail "ARCADE_GAMES is empty in $root's make database"
  [ "${#tasks[@]}" -gt 0 ] || fail "ARCADE_TASKS is empty in $root's make database"
  [ "${#math[@]}" -gt 0 ] || fail "ARCADE_MATH is empty in $root's make database"
  names=(counter "${games[@]}" "${tasks[@]}" "${math[@]}")
else
  root=""
  mapfile -t names < <("$PYTHON" -c 'from oracle.inventory import SERVERS; print("\n".join(SERVERS))')
  mapfile -t math < <("$PYTHON" -c 'from oracle.inventory import MATH; print("\n".join(MATH))')
  if [ "${#names[@]}" -lt 2 ] || [ "${#math[@]}" -eq 0 ]; then
    fail "cannot read the oracle inventory"
  fi
fi

declare -A seen=()
for name in "${names[@]}"; do
  [[ "$name" =~ ^[A-Za-z0-9_-]+$ ]] || fail "invalid server name '$name'"
  [ -z "${seen[$name]:-}" ] || fail "duplicate server name '$name'"
  seen[$name]=1
done
for required in counter bandit connect4 maze wordle; do
  [ -n "${seen[$required]:-}" ] || fail "the inventory lacks the '$required' server"
done
if [ -n "$root" ]; then
  echo "inventory from $root: ${#games[@]} games, ${#tasks[@]} tasks, ${#math[@]} math (${#names[@]} servers with counter)"
else
  echo "inventory: our oracle, ${#names[@]} servers (${#math[@]} math)"
fi

# ---- build (external root only; never trust a cached binary) ---------------------------

if [ -n "$root" ]; then
  for name in "${names[@]}"; do
    rm -f "$root/build/rel/bin/$name"
    "$make_cmd" -C "$root" "build/rel/bin/$name" >"$workdir/build-$name.log" 2>&1 ||
      { cat "$workdir/build-$name.log" >&2; fail "make build/rel/bin/$name failed"; }
    [ -x "$root/build/rel/bin/$name" ] || fail "make did not produce build/rel/bin/$name"
  done
  echo "built ${#names[@]} servers"
fi

if [ -z "$root" ]; then
  if [ -z "${KILN_VERIFY:-}" ]; then
    if [ -x "$(dirname "$PYTHON")/kiln-verify" ]; then
      KILN_VERIFY="$(dirname "$PYTHON")/kiln-verify"
    else
      KILN_VERIFY="$(command -v kiln-verify)" || fail "kiln-verify is not installed"
    fi
  fi
fi

# ---- launch and wait for health --------------------------------------------------------

health_ok() {
  # One GET /health over bash's /dev/tcp: true when the status line says 200.
  local port="$1" status_line=""
  { exec 3<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null || return 1
  printf 'GET /health HTTP/1.0\r\nHost: 127.0.0.1:%s\r\n\r\n' "$port" >&3 || { exec 3>&-; return 1; }
  IFS= read -r -t 2 status_line <&3 || true
  exec 3>&-
  [[ "$status_line" == HTTP/1.[01]\ 200* ]]
}

wait_healthy() {
  local name="$1" pid="$2" url="$3" log="$4" attempt=0 port
  port="${url##*:}"
  while [ "$attempt" -lt "$health_attempts" ]; do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "---- log of $name ($url)" >&2
      cat "$log" >&2
      fail "server $name exited before answering /health"
    fi
    if health_ok "$port"; then
      return 0
    fi
    sleep 0.05
    attempt=$((attempt + 1))
  done
  echo "---- log of $name ($url)" >&2
  cat "$log" >&2
  fail "server $name did not answer /health after $health_attempts attempts"
}

launch() {
  # Start server number $1 in the background; its PID joins `pids` (stopped by the trap).
  local i="$1" name="${names[$1]}" port log
  local extra=()
  port=$((base_port + i))
  if [ "$name" = bandit ]; then
    extra=(--max-sessions 1)
  fi
  log="$workdir/server-$name.log"
  if [ -n "$root" ]; then
    "$root/build/rel/bin/$name" --host 127.0.0.1 --port "$port" "${extra[@]}" >"$log" 2>&1 &
  else
    "$KILN_VERIFY" oracle serve "$name" --host 127.0.0.1 --port "$port" "${extra[@]}" >"$log" 2>&1 &
  fi
  pids+=("$!")
  urls+=("http://127.0.0.1:$port")
  echo "started $name pid $! port $port"
}

# Servers start in batches of about one per CPU, each batch healthy before the next starts,
# so that no server's readiness budget is eaten by two dozen interpreters starting at once.
batch="${KILN_OPENENV_INTEROP_LAUNCH_BATCH:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)}"
case "$batch" in '' | *[!0-9]* | 0) batch=2 ;; esac
urls=()
first=0
while [ "$first" -lt "${#names[@]}" ]; do
  last=$((first + batch))
  if [ "$last" -gt "${#names[@]}" ]; then
    last="${#names[@]}"
  fi
  for ((i = first; i < last; i++)); do
    launch "$i"
  done
  for ((i = first; i < last; i++)); do
    wait_healthy "${names[$i]}" "${pids[$i]}" "${urls[$i]}" "$workdir/server-${names[$i]}.log"
  done
  first="$last"
done
echo "all ${#names[@]} servers healthy"

# ---- URL variables ---------------------------------------------------------------------

url_of() {
  local wanted="$1" j=0 name
  for name in "${names[@]}"; do
    if [ "$name" = "$wanted" ]; then
      echo "${urls[$j]}"
      return 0
    fi
    j=$((j + 1))
  done
  return 1
}

join_by_comma() {
  local IFS=,
  echo "$*"
}

KILN_OPENENV_INTEROP_COUNTER_URL="$(url_of counter)"
KILN_OPENENV_INTEROP_BANDIT_URL="$(url_of bandit)"
KILN_OPENENV_INTEROP_CONNECT4_URL="$(url_of connect4)"
KILN_OPENENV_INTEROP_MAZE_URL="$(url_of maze)"
KILN_OPENENV_INTEROP_WORDLE_URL="$(url_of wordle)"
KILN_OPENENV_INTEROP_ARCADE_URLS="$(join_by_comma "${urls[@]:1}")"
math_urls=()
for name in "${math[@]}"; do
  math_urls+=("$(url_of "$name")")
done
KILN_OPENENV_INTEROP_EXACT_TEXT_URLS="$(join_by_comma "${math_urls[@]}")"
export KILN_OPENENV_INTEROP_COUNTER_URL KILN_OPENENV_INTEROP_BANDIT_URL \
  KILN_OPENENV_INTEROP_CONNECT4_URL KILN_OPENENV_INTEROP_MAZE_URL \
  KILN_OPENENV_INTEROP_WORDLE_URL KILN_OPENENV_INTEROP_ARCADE_URLS \
  KILN_OPENENV_INTEROP_EXACT_TEXT_URLS

# ---- the suite -------------------------------------------------------------------------

echo "== interop suite (tests/gate)"
# In the background so that INT/TERM reach the traps at once instead of after the suite.
"$PYTHON" -m pytest tests/gate -p no:cacheprovider "$@" &
suite_pid=$!
wait "$suite_pid"
