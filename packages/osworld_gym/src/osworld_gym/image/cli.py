"""``osworld-gym image ...``: build, list and clean up what the docker provider runs.

osworld-gym image build [--apps minimal|full] [--tag TAG] [--base IMAGE] [--mirror URL]
osworld-gym image ls
osworld-gym image prune [--all] [--images]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def cmd_image_build(args: argparse.Namespace) -> int:
    from osworld_gym.image.build import BuildOptions, build_image

    opts = BuildOptions(
        apps=args.apps,
        tag=args.tag,
        base=args.base,
        mirror=args.mirror,
        wheel=Path(args.wheel) if args.wheel else None,
        no_cache=args.no_cache,
    )
    result = build_image(opts, progress=lambda line: print(line, file=sys.stderr, flush=True))
    steps = ", ".join(f"{k} {v:.1f} s" for k, v in result.timings.items())
    print(f"{result.tag} {'(reused) ' if result.reused else ''}{result.image_id[:19]}  [{steps}]")
    return 0


def cmd_image_ls(args: argparse.Namespace) -> int:
    from osworld_gym.image import containers, recipe
    from osworld_gym.image.build import docker_client

    client = docker_client()
    for img in client.images.list(filters={"label": f"{recipe.LABEL_IMAGE}=desktop"}):
        size = img.attrs.get("Size", 0) / 1e9
        print(
            f"image     {', '.join(img.tags) or img.short_id:<40} {size:5.2f} GB  "
            f"apps={img.labels.get(recipe.LABEL_APPS)}"
        )
    for c in client.containers.list(
        all=True, filters={"label": f"{containers.LABEL_MANAGED}=true"}
    ):
        alive = containers.owner_alive(c.labels)
        owner = {True: "alive", False: "DEAD", None: "other host"}[alive]
        print(
            f"container {c.short_id:<40} {c.status:<9} owner pid "
            f"{c.labels.get(containers.LABEL_OWNER_PID)} ({owner})"
        )
    return 0


def cmd_image_prune(args: argparse.Namespace) -> int:
    from osworld_gym.image import containers, recipe
    from osworld_gym.image.build import docker_client

    client = docker_client()
    removed = containers.cleanup_stale(client, include_live=args.all)
    print(f"removed {len(removed)} container(s){': ' + ' '.join(removed) if removed else ''}")
    if args.images:
        images = client.images.list(filters={"label": f"{recipe.LABEL_IMAGE}=desktop"})
        for img in images:
            client.images.remove(img.id, force=True)
        tags = [recipe.BASE_TAG] if client.images.list(name=recipe.BASE_TAG) else []
        for tag in tags:
            client.images.remove(tag)
        print(f"removed {len(images) + len(tags)} image(s)")
    return 0


def add_image_commands(sub: argparse._SubParsersAction) -> None:
    """Add the ``image`` command group to the ``osworld-gym`` parser."""
    from osworld_gym.image.build import DEFAULT_MIRROR
    from osworld_gym.image.recipe import APPS

    image = sub.add_parser(
        "image", help="build and clean up the docker provider's images"
    ).add_subparsers(dest="image_command", required=True)
    build = image.add_parser(
        "build", help="build the desktop image offline (debootstrap base, wheels from the host)"
    )
    build.add_argument(
        "--apps",
        choices=sorted(APPS),
        default="minimal",
        help="app set: minimal (xterm, mousepad) or full (+ office, chromium, vlc)",
    )
    build.add_argument("--tag", help="image tag (default: osworld-gym:<version>-<apps>)")
    build.add_argument(
        "--base",
        help="base image, e.g. debian:bookworm-slim (default: a "
        "debootstrap'ed Debian bookworm, imported; needs root once)",
    )
    build.add_argument("--mirror", default=DEFAULT_MIRROR, help="Debian mirror for debootstrap")
    build.add_argument(
        "--wheel",
        help="osworld-gym wheel to install (default: built from this source tree with uv)",
    )
    build.add_argument("--no-cache", action="store_true", help="rebuild every layer")
    build.set_defaults(func=cmd_image_build)

    ls = image.add_parser("ls", help="list our images and containers (with their owners)")
    ls.set_defaults(func=cmd_image_ls)

    prune = image.add_parser("prune", help="remove containers whose owner process is gone")
    prune.add_argument(
        "--all",
        action="store_true",
        help="also remove containers of owners still running on this host",
    )
    prune.add_argument(
        "--images",
        action="store_true",
        help="also remove our images (desktop images and the debootstrap base)",
    )
    prune.set_defaults(func=cmd_image_prune)
