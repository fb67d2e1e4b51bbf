"""Our desktop image for the docker provider: the recipe (:mod:`.recipe`) and the offline
build (:mod:`.build`, ``osworld-gym image build``).

Importing this package needs neither Docker nor the docker SDK; building does.

>>> from osworld_gym.image import default_tag
>>> default_tag("minimal").startswith("osworld-gym:")
True
"""

from osworld_gym.image.build import BuildOptions, BuildResult, ImageBuildError, build_image
from osworld_gym.image.recipe import APPS, BASE_TAG, default_tag, render_dockerfile

__all__ = [
    "APPS",
    "BASE_TAG",
    "BuildOptions",
    "BuildResult",
    "ImageBuildError",
    "build_image",
    "default_tag",
    "render_dockerfile",
]
