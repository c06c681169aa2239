#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# tests/win32/wine-run.sh - run one Windows program under wine, headless;
# the LOG_COMPILER of `make check` in a MinGW cross build, also usable by
# hand:  tests/win32/wine-run.sh tests/conformance/test_reactor.exe select [filter]
#
# Environment (all optional):
#   WINE         the wine loader (default: wine64, else /usr/lib/wine/wine64)
#   WINEPREFIX   the wine prefix (default: ./wine-prefix in the current
#                directory, i.e. the build tree); created on first use
#   TAXI_MINGW_CC  the cross compiler, to find the MinGW run-time DLLs the
#                tests need (libwinpthread-1.dll)
#
# WINEDEBUG=-all keeps wine's diagnostics out of the test logs, and the
# Mono and Gecko installers are disabled (an empty DLL override) so the
# first start of a prefix never waits for a dialog.  The prefix is created
# under a lock, as `make -j check` starts several programs at once.
set -e

if [ -z "${WINE:-}" ]; then
  if command -v wine64 >/dev/null 2>&1; then WINE=wine64
  elif [ -x /usr/lib/wine/wine64 ]; then WINE=/usr/lib/wine/wine64
  else WINE=wine
  fi
fi
WINEPREFIX=${WINEPREFIX:-$(pwd)/wine-prefix}
WINEDEBUG=${WINEDEBUG:--all}
WINEDLLOVERRIDES=${WINEDLLOVERRIDES:-mscoree,mshtml=}
export WINEPREFIX WINEDEBUG WINEDLLOVERRIDES
# No display: wine must not try to open windows.
unset DISPLAY WAYLAND_DISPLAY

if [ ! -f "$WINEPREFIX/system.reg" ]; then
  mkdir -p "$(dirname "$WINEPREFIX")"
  (
    flock 9
    if [ ! -f "$WINEPREFIX/system.reg" ]; then
      "$WINE" wineboot -i >/dev/null 2>&1 || true
      wineserver -w 2>/dev/null || true
    fi
  ) 9>"$WINEPREFIX.lock"
fi

# The directory of the MinGW run-time DLLs, for the loader's search path.
cc=${TAXI_MINGW_CC:-x86_64-w64-mingw32-gcc}
dll=$("$cc" -print-file-name=libwinpthread-1.dll 2>/dev/null || true)
if [ -n "$dll" ] && [ -f "$dll" ]; then
  WINEPATH="$(dirname "$dll")${WINEPATH:+;$WINEPATH}"
  export WINEPATH
fi

exec "$WINE" "$@"
