"""Release-ready packaging: license and PyPI page of each package, and the release check itself.

The check that builds the three packages and runs the README example from osworld-gym's wheel
alone is scripts/check_wheels.py (scripts/test.sh runs it with the whole suite); here it is shown
to reject what it claims to reject, on small wheels made in the test (no build).
"""

from __future__ import annotations

import importlib.util
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"osworld-gym": "osworld_gym", "arpo-trainer": "arpo_trainer", "arpo-eval": "arpo_eval"}

spec = importlib.util.spec_from_file_location("check_wheels", ROOT / "scripts" / "check_wheels.py")
check_wheels = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_wheels)


@pytest.mark.parametrize("name", PACKAGES)
def test_each_package_declares_the_license_and_its_readme(name):
    folder = ROOT / "packages" / PACKAGES[name]
    project = tomllib.loads((folder / "pyproject.toml").read_text())["project"]
    assert project["name"] == name
    assert project["license"] == "Apache-2.0"
    assert project["readme"] == "README.md"
    # the sdist and wheel take LICENSE from the package folder: a copy of the repository's
    assert (folder / "LICENSE").read_bytes() == (ROOT / "LICENSE").read_bytes()
    readme = (folder / "README.md").read_text()
    assert "\\n" not in readme.splitlines()[0]
    assert readme.startswith(f"# {name}\n")
    for section in ("## Install", "```python"):
        assert section in readme, f"{name}'s README has no {section!r}"


def make_wheel(path: Path, name: str, description: str, license_text: str | None, **meta) -> Path:
    module = PACKAGES[name]
    headers = {
        "Metadata-Version": "2.4",
        "Name": name,
        "Version": "0.1.0",
        "License-Expression": "Apache-2.0",
        "License-File": "LICENSE",
        "Description-Content-Type": "text/markdown",
        **meta,
    }
    metadata = "".join(f"{k}: {v}\n" for k, v in headers.items() if v is not None)
    wheel = path / f"{module}-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(f"{module}/__init__.py", "")
        z.writestr(f"{module}-0.1.0.dist-info/METADATA", metadata + "\n" + description)
        if license_text is not None:
            z.writestr(f"{module}-0.1.0.dist-info/licenses/LICENSE", license_text)
    return wheel


def test_the_release_check_accepts_a_wheel_as_built(tmp_path):
    readme = (ROOT / "packages/arpo_eval/README.md").read_text()
    license_text = (ROOT / "LICENSE").read_text()
    wheel = make_wheel(tmp_path, "arpo-eval", readme, license_text)
    check_wheels.check_wheel(wheel, "arpo-eval", license_text)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"description": "# arpo-eval\\nSee the repository README.\n"},
            "is not the package README",
        ),
        ({"license_text": None}, "the LICENSE file is missing or differs"),
        ({"license_text": "MIT"}, "the LICENSE file is missing or differs"),
        ({"License-Expression": "MIT"}, "License-Expression is 'MIT'"),
        ({"Description-Content-Type": None}, "Description-Content-Type is None"),
    ],
)
def test_the_release_check_rejects(tmp_path, change, message):
    license_text = (ROOT / "LICENSE").read_text()
    kwargs = {
        "description": (ROOT / "packages/arpo_eval/README.md").read_text(),
        "license_text": license_text,
    }
    kwargs.update({k: v for k, v in change.items() if k in kwargs})
    meta = {k: v for k, v in change.items() if k not in kwargs}
    wheel = make_wheel(tmp_path, "arpo-eval", kwargs["description"], kwargs["license_text"], **meta)
    with pytest.raises(check_wheels.CheckFailed, match=message):
        check_wheels.check_wheel(wheel, "arpo-eval", license_text)
