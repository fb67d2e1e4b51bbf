"""The release check: build the three packages as a user would get them, and use osworld-gym alone.

1. `uv build --all-packages`: each sdist, then each wheel built from its sdist (so an sdist that
   misses a file fails here too).
2. Every wheel and sdist carries the license (Apache-2.0, PEP 639 metadata and the LICENSE file,
   identical to the repository's) and its package README as the PyPI description.
3. osworld-gym's wheel, alone, goes into a new venv of Debian's python3 (nothing of this
   workspace): no torch, transformers or TRL may come with it.
4. The README's notebook example runs from that venv, outside the repository (so the installed
   wheel is what it imports), on a real local desktop, and must score 1.0.

The venv resolves osworld-gym's dependencies from PyPI as its metadata allows (not from uv.lock):
what `pip install osworld-gym` gives a user today. scripts/test.sh runs this with the whole suite;
by hand: `uv run --frozen python scripts/check_wheels.py [--keep DIR]`.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from email.parser import Parser
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"osworld-gym": "osworld_gym", "arpo-trainer": "arpo_trainer", "arpo-eval": "arpo_eval"}
# must not come with osworld-gym: the trainer's stack, and our other two packages
HEAVY = ("torch", "transformers", "trl", "peft", "accelerate", "arpo_trainer", "arpo_eval")
PYTHON = "/usr/bin/python3"


class CheckFailed(Exception):
    pass


def run(*cmd: str, cwd: Path | None = None, timeout: float = 600) -> str:
    out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise CheckFailed(f"{' '.join(cmd)} exited {out.returncode}:\n{out.stderr[-3000:]}")
    return out.stdout


def readme_example() -> str:
    """The README's notebook example (tests/test_readme.py runs the same block in the workspace)."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## In a notebook") :]
    m = re.search(r"```python\n(.*?)```", section, re.S)
    if m is None:
        raise CheckFailed("README.md: no ```python block under '## In a notebook'")
    return m.group(1)


def check_wheel(wheel: Path, name: str, license_text: str) -> None:
    readme = (ROOT / "packages" / PACKAGES[name] / "README.md").read_text()
    with zipfile.ZipFile(wheel) as z:
        dist_info = next(n.split("/")[0] for n in z.namelist() if ".dist-info/" in n)
        meta_text = z.read(f"{dist_info}/METADATA").decode()
        files = set(z.namelist())
        license_path = f"{dist_info}/licenses/LICENSE"
        shipped_license = z.read(license_path).decode() if license_path in files else None
    meta = Parser().parsestr(meta_text)
    problems = []
    if meta["Name"] != name:
        problems.append(f"Name is {meta['Name']!r}")
    if meta["License-Expression"] != "Apache-2.0":
        problems.append(f"License-Expression is {meta['License-Expression']!r}")
    if meta["License-File"] != "LICENSE" or shipped_license != license_text:
        problems.append("the LICENSE file is missing or differs from the repository's")
    if meta["Description-Content-Type"] != "text/markdown":
        problems.append(f"Description-Content-Type is {meta['Description-Content-Type']!r}")
    if meta.get_payload().strip() != readme.strip():
        problems.append("the description is not the package README")
    if not any(f.startswith(f"{PACKAGES[name]}/") for f in files):
        problems.append(f"no {PACKAGES[name]}/ package inside")
    if problems:
        raise CheckFailed(f"{wheel.name}: " + "; ".join(problems))


def check_sdist(sdist: Path, license_text: str) -> None:
    with tarfile.open(sdist) as t:
        top = t.getnames()[0].split("/")[0]
        license_file = t.extractfile(f"{top}/LICENSE")
        readme = t.extractfile(f"{top}/README.md")
        if license_file is None or license_file.read().decode() != license_text or readme is None:
            raise CheckFailed(f"{sdist.name}: LICENSE (as the repository's) or README.md missing")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", type=Path, help="work in this directory and keep it")
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="check-wheels-"))
    work.mkdir(parents=True, exist_ok=True)
    rows: list[tuple[str, str]] = []
    try:
        t0 = time.monotonic()
        run("uv", "build", "--all-packages", "--quiet", "-o", str(work / "dist"), cwd=ROOT)
        rows.append(("build 3 sdists + wheels, s", f"{time.monotonic() - t0:.1f}"))
        license_text = (ROOT / "LICENSE").read_text()
        for name, module in PACKAGES.items():
            (wheel,) = (work / "dist").glob(f"{module}-*.whl")
            (sdist,) = (work / "dist").glob(f"{module}-*.tar.gz")
            check_wheel(wheel, name, license_text)
            check_sdist(sdist, license_text)
            rows.append((f"{wheel.name}, KiB", f"{wheel.stat().st_size / 1024:.0f}"))

        t0 = time.monotonic()
        venv = work / "venv"
        run("uv", "venv", "--quiet", "--python", PYTHON, str(venv))
        py = str(venv / "bin" / "python")
        (wheel,) = (work / "dist").glob("osworld_gym-*.whl")
        run("uv", "pip", "install", "--quiet", "--python", py, str(wheel))
        rows.append(("install osworld-gym alone, s", f"{time.monotonic() - t0:.1f}"))
        probe = (
            "import importlib.util, importlib.metadata as md, osworld_gym\n"
            f"print(osworld_gym.__file__)\nprint(len(list(md.distributions())))\n"
            f"print(*[n for n in {HEAVY!r} if importlib.util.find_spec(n)])\n"
        )
        where, count, heavy = (run(py, "-c", probe, cwd=work).splitlines() + [""])[:3]
        if not where.startswith(str(venv)):
            raise CheckFailed(f"osworld_gym imported from {where}, not from the venv")
        if heavy:
            raise CheckFailed(f"installing osworld-gym alone brought in: {heavy}")
        rows.append(("packages in the venv (osworld-gym included)", count))
        rows.append(("torch, transformers, TRL, peft, accelerate", "absent"))

        run_dir = work / "run"
        run_dir.mkdir()
        t0 = time.monotonic()
        out = run(py, "-c", readme_example(), cwd=run_dir, timeout=300).splitlines()
        seconds = time.monotonic() - t0
        rows.append(("README notebook example, s (desktop start included)", f"{seconds:.1f}"))
        if not out or "(1080, 1920, 3)" not in out[0] or not out[-1].startswith("1.0 None {"):
            shown = "\n".join(out)
            raise CheckFailed(f"the README example from the wheel did not score 1.0:\n{shown}")
        rows.append(("its reward, infra_error", out[-1].split(" {")[0]))
    except CheckFailed as e:
        print(f"check_wheels: FAILED: {e}", file=sys.stderr)
        return 1
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    width = max(len(k) for k, _ in rows)
    print("check_wheels: the three packages as released, osworld-gym alone in a new venv")
    for key, value in rows:
        print(f"  {key:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
