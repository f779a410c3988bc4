"""K1: the desktop metadata in packaging/ — the .desktop entry and the AppStream metainfo pass Debian's
validators (``desktop-file-validate``, ``appstreamcli validate --no-net``; .ci/run installs them), and
every packaging file names the app with the same reverse-DNS id the app gives Qt (``setDesktopFileName``),
the same command and the same version; the icons exist in every hicolor size; the Flatpak manifest's pins
satisfy pyproject.toml; install-desktop-entry.sh installs an entry that still validates.
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

from workbench.app import APP_ID

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "packaging"
DESKTOP = PKG / f"{APP_ID}.desktop"
METAINFO = PKG / f"{APP_ID}.metainfo.xml"
FLATPAK = PKG / "flatpak" / f"{APP_ID}.yml"
ICONS = PKG / "icons" / "hicolor"
SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _tool(name: str, package: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: install Debian's {package} (`apt-get install {package}`; .ci/run does)")
    return path


def _desktop_keys(path: Path) -> dict[str, str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "[Desktop Entry]"
    return dict(line.split("=", 1) for line in lines[1:] if line and not line.startswith("#"))


def test_desktop_entry_passes_desktop_file_validate_K1() -> None:
    done = subprocess.run([_tool("desktop-file-validate", "desktop-file-utils"), str(DESKTOP)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and not done.stdout.strip() and not done.stderr.strip(), done.stdout + done.stderr


def test_metainfo_passes_appstreamcli_validate_K1() -> None:
    """No error and no warning (pedantic hints, such as the capital letter Flathub ids carry, are allowed)."""
    done = subprocess.run([_tool("appstreamcli", "appstream"), "validate", "--no-net", "--explain", str(METAINFO)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not re.search(r"^[EW]: ", done.stdout, re.MULTILINE), done.stdout


def test_every_packaging_file_names_the_app_with_one_id_K1() -> None:
    """The id Qt is given is the .desktop file's name (Wayland matches the two to show the icon), the
    metainfo's id and launchable, the icon's name and the Flatpak app id."""
    desktop = _desktop_keys(DESKTOP)
    assert desktop["Icon"] == APP_ID
    meta = ET.parse(METAINFO).getroot()
    assert meta.findtext("id") == APP_ID
    assert meta.findtext("launchable[@type='desktop-id']") == DESKTOP.name
    assert meta.findtext("icon[@type='stock']") == APP_ID
    assert yaml.safe_load(FLATPAK.read_text(encoding="utf-8"))["app-id"] == APP_ID
    assert (ROOT / "workbench" / "app.py").read_text(encoding="utf-8").count("setDesktopFileName(APP_ID)") == 1


def test_the_command_and_version_agree_across_packaging_K1() -> None:
    """One command, ``workbench`` (the console script, the bundle's executable, the Flatpak command, the
    entry's Exec); the metainfo's newest release is the project's version."""
    assert PYPROJECT["project"]["scripts"]["workbench"] == "workbench.cli:main"
    assert _desktop_keys(DESKTOP)["Exec"] == "workbench"
    assert re.search(r'^\s*name="workbench",', (PKG / "workbench.spec").read_text(encoding="utf-8"), re.MULTILINE)
    assert "from workbench.cli import main" in (PKG / "entry.py").read_text(encoding="utf-8")
    assert yaml.safe_load(FLATPAK.read_text(encoding="utf-8"))["command"] == "workbench"
    meta = ET.parse(METAINFO).getroot()
    assert meta.findtext("provides/binary") == "workbench"
    releases = meta.findall("releases/release")
    assert releases and releases[0].get("version") == PYPROJECT["project"]["version"]


def test_icons_in_every_hicolor_size_and_the_runtime_copy_K1() -> None:
    svg = ICONS / "scalable" / "apps" / f"{APP_ID}.svg"
    ET.parse(svg)  # well-formed
    for size in SIZES:
        png = ICONS / f"{size}x{size}" / "apps" / f"{APP_ID}.png"
        head = png.read_bytes()[:24]
        assert head[:8] == b"\x89PNG\r\n\x1a\n", png
        assert struct.unpack(">II", head[16:24]) == (size, size), png
    # The window's icon (shipped in the wheel) is the same drawing: render_icons.py copies it.
    assert (ROOT / "resources" / "icons" / f"{APP_ID}.svg").read_bytes() == svg.read_bytes()


def test_flatpak_manifest_pins_satisfy_pyproject_K1() -> None:
    """Every dependency but PySide6 (the PySide base app's) is pinned, at a version pyproject accepts, from
    an https address with a sha256; the files the manifest installs exist."""
    manifest = yaml.safe_load(FLATPAK.read_text(encoding="utf-8"))
    assert manifest["base"] == "io.qt.PySide.BaseApp" and manifest["runtime"] == "org.kde.Platform"
    assert "NOT BUILT BY THIS PROJECT'S CI" in FLATPAK.read_text(encoding="utf-8")  # says why, in its header
    deps_file = manifest["modules"][0]
    deps = yaml.safe_load((FLATPAK.parent / deps_file).read_text(encoding="utf-8"))
    pins = dict(re.findall(r"'([A-Za-z0-9_.\-]+)==([^']+)'", deps["build-commands"][0]))
    pinned = {_norm(name): version for name, version in pins.items()}
    for source in deps["sources"]:
        assert source["url"].startswith("https://") and re.fullmatch(r"[0-9a-f]{64}", source["sha256"]), source
    assert len(deps["sources"]) == len(pins)
    for spec in PYPROJECT["project"]["dependencies"]:
        req = Requirement(spec)
        if _norm(req.name).startswith("pyside6"):
            continue
        assert _norm(req.name) in pinned, f"{req.name} is not pinned: run packaging/flatpak/pin_deps.py"
        assert req.specifier.contains(pinned[_norm(req.name)], prereleases=True), (
            f"{req.name}=={pinned[_norm(req.name)]} does not satisfy {spec}: run packaging/flatpak/pin_deps.py")
    app = manifest["modules"][1]
    for command in app["build-commands"]:
        for path in re.findall(r"(packaging/\S+)", command):
            for size in SIZES:
                concrete = path.replace("${FLATPAK_ID}", APP_ID).replace("${size}", str(size))
                assert (ROOT / concrete).is_file(), f"the Flatpak manifest installs {concrete}, which is missing"


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_install_desktop_entry_script_installs_a_valid_entry_K1(tmp_path: Path) -> None:
    """The script puts the entry, metainfo and icons under ~/.local/share with Exec naming the app's
    absolute path (quoted when it has a space), and the installed entry still validates; --uninstall
    takes them away."""
    app = tmp_path / "my apps" / "workbench"
    app.parent.mkdir()
    app.write_text("#!/bin/sh\n")
    app.chmod(0o755)
    home = tmp_path / "home"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home)}
    script = PKG / "install-desktop-entry.sh"
    done = subprocess.run(["bash", str(script), "--exec", str(app)], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    data = home / ".local" / "share"
    installed = data / "applications" / DESKTOP.name
    assert _desktop_keys(installed)["Exec"] == f'"{app}"'
    assert _desktop_keys(installed)["Icon"] == APP_ID
    check = subprocess.run([_tool("desktop-file-validate", "desktop-file-utils"), str(installed)],
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0 and not check.stdout.strip(), check.stdout + check.stderr
    for size in SIZES:
        assert (data / "icons" / "hicolor" / f"{size}x{size}" / "apps" / f"{APP_ID}.png").is_file()
    assert (data / "icons" / "hicolor" / "scalable" / "apps" / f"{APP_ID}.svg").is_file()
    assert (data / "metainfo" / METAINFO.name).is_file()

    done = subprocess.run(["bash", str(script), "--uninstall"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not installed.exists() and not list(data.rglob(f"{APP_ID}.*"))

    missing = subprocess.run(["bash", str(script), "--exec", str(tmp_path / "nope")], env=env, capture_output=True,
                             text=True, timeout=60)
    assert missing.returncode == 2 and "nope" in missing.stderr
