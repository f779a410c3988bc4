#!/usr/bin/env bash
# Add Agent Workbench to your desktop's applications (for you only, under ~/.local/share): the .desktop
# entry, the icon in every hicolor size and the AppStream metainfo (DESIGN §7, K1).
#
#   packaging/install-desktop-entry.sh [--exec PATH]    # install (again: it overwrites its own files)
#   packaging/install-desktop-entry.sh --uninstall
#
# The entry starts PATH; by default the `workbench` on your PATH (pip, pipx or uv install), else the
# bundle this checkout built (dist/workbench/workbench). The app calls setDesktopFileName with the same
# id, so Wayland shows this icon on its windows.
set -euo pipefail

APP_ID="io.github.agentworkbench.Workbench"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$HERE")"
DATA="${XDG_DATA_HOME:-$HOME/.local/share}"
SIZES="16 24 32 48 64 128 256 512"

usage() { sed -n '2,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
die() { echo "install-desktop-entry.sh: $*" >&2; exit 2; }

exec_path=""
uninstall=0
while [ $# -gt 0 ]; do
    case "$1" in
        --exec) [ $# -ge 2 ] || die "--exec needs a path"; exec_path="$2"; shift 2 ;;
        --exec=*) exec_path="${1#--exec=}"; shift ;;
        --uninstall) uninstall=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done

files=("$DATA/applications/$APP_ID.desktop" "$DATA/metainfo/$APP_ID.metainfo.xml"
       "$DATA/icons/hicolor/scalable/apps/$APP_ID.svg")
for size in $SIZES; do files+=("$DATA/icons/hicolor/${size}x${size}/apps/$APP_ID.png"); done

refresh() {  # the desktop's caches, where the tools exist; a desktop without them rescans by itself
    if command -v update-desktop-database >/dev/null 2>&1; then update-desktop-database -q "$DATA/applications" || true; fi
    if command -v gtk-update-icon-cache >/dev/null 2>&1; then gtk-update-icon-cache -q -t -f "$DATA/icons/hicolor" || true; fi
}

if [ "$uninstall" = 1 ]; then
    rm -f "${files[@]}"
    refresh
    echo "removed Agent Workbench's desktop entry and icons from $DATA"
    exit 0
fi

if [ -z "$exec_path" ]; then
    if command -v workbench >/dev/null 2>&1; then
        exec_path="$(command -v workbench)"
    elif [ -x "$ROOT/dist/workbench/workbench" ]; then
        exec_path="$ROOT/dist/workbench/workbench"
    else
        die "no 'workbench' on PATH and no bundle at $ROOT/dist/workbench/ — install the app (pipx install .) or build the bundle (packaging/build.sh), or name it with --exec PATH"
    fi
fi
[ -x "$exec_path" ] || die "--exec $exec_path is not an executable file"
exec_path="$(cd "$(dirname "$exec_path")" && pwd)/$(basename "$exec_path")"  # absolute: menus have no cwd
case "$exec_path" in
    *[\"\`\$\\]*) die "the path $exec_path holds a character a desktop entry cannot quote simply (\" \` \$ \\); move the app" ;;
esac
# Desktop Entry Exec: quote a path with spaces; a literal % is written %%.
quoted="${exec_path//%/%%}"
case "$quoted" in *[[:space:]\'\<\>\~\|\&\;\(\)\*\?\#]*) quoted="\"$quoted\"" ;; esac

mkdir -p "$DATA/applications"
while IFS= read -r line || [ -n "$line" ]; do
    case "$line" in
        Exec=*) printf 'Exec=%s\n' "$quoted" ;;
        TryExec=*) ;;
        *) printf '%s\n' "$line" ;;
    esac
done < "$HERE/$APP_ID.desktop" > "$DATA/applications/$APP_ID.desktop.tmp"
mv "$DATA/applications/$APP_ID.desktop.tmp" "$DATA/applications/$APP_ID.desktop"

install -D -m 644 "$HERE/$APP_ID.metainfo.xml" "$DATA/metainfo/$APP_ID.metainfo.xml"
install -D -m 644 "$HERE/icons/hicolor/scalable/apps/$APP_ID.svg" "$DATA/icons/hicolor/scalable/apps/$APP_ID.svg"
for size in $SIZES; do
    install -D -m 644 "$HERE/icons/hicolor/${size}x${size}/apps/$APP_ID.png" \
        "$DATA/icons/hicolor/${size}x${size}/apps/$APP_ID.png"
done
refresh
echo "installed $DATA/applications/$APP_ID.desktop (Exec=$quoted) and its icons"
