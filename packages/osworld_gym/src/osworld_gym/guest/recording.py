"""Screen recording of the guest's own display with ``ffmpeg -f x11grab`` (OSWorld's
``/start_recording`` and ``/end_recording``)."""

from __future__ import annotations

import logging
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

from osworld_gym.errors import MissingDependencyError
from osworld_gym.guest.processes import ProcessRegistry

log = logging.getLogger(__name__)

FRAMERATE = 15
STOP_TIMEOUT_S = 15.0
#: ffmpeg opens its output only once the first grabbed frame is encoded; a SIGINT before that
#: ends it with no file at all, which a recording of a sub-second episode sometimes met. ``end``
#: waits this long at most for the file to appear before stopping ffmpeg.
FIRST_FRAME_TIMEOUT_S = 5.0


class RecordingStateError(RuntimeError):
    """Start while recording, or end while not recording (HTTP 400)."""


class RecordingFailed(RuntimeError):
    """ffmpeg died or wrote no file (HTTP 500)."""


class Recorder:
    """At most one ffmpeg recording at a time; the mp4 lives in the guest's state directory."""

    def __init__(
        self, registry: ProcessRegistry, display: str, size: tuple[int, int], state_dir: Path
    ):
        self._registry = registry
        self._display = display
        self._size = size
        self._dir = state_dir
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._path: Path | None = None
        self._n = 0

    @property
    def recording(self) -> bool:
        return self._proc is not None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self) -> None:
        with self._lock:
            if self._proc is not None:
                raise RecordingStateError("a recording is already running; end it first")
            if shutil.which("ffmpeg") is None:
                raise MissingDependencyError(
                    "ffmpeg is not installed; install the 'ffmpeg' package"
                )
            self._n += 1
            path = self._dir / f"recording-{self._n}.mp4"
            path.unlink(missing_ok=True)
            w, h = self._size
            argv = [
                "ffmpeg",
                "-hide_banner",
                "-loglevel",
                "error",
                "-nostdin",
                "-y",
                "-f",
                "x11grab",
                "-draw_mouse",
                "1",
                "-framerate",
                str(FRAMERATE),
                "-video_size",
                f"{w}x{h}",
                "-i",
                self._display,
                "-c:v",
                "libx264",
                "-preset",
                "ultrafast",
                "-pix_fmt",
                "yuv420p",
                "-movflags",
                "+faststart",
                str(path),
            ]
            log_path = self._dir / "ffmpeg.log"
            with open(log_path, "wb") as out:
                proc = self._registry.popen(
                    argv, stdout=out, stderr=subprocess.STDOUT, judge=True
                )  # writes into the judge's state dir
            # x11grab fails within a few ms if it cannot open the display.
            time.sleep(0.05)
            if proc.poll() is not None:
                raise RecordingFailed(
                    f"ffmpeg exited at once (status {proc.returncode}): "
                    + log_path.read_text(errors="replace")[-400:]
                )
            self._proc, self._path = proc, path
            log.info("recording %s to %s (ffmpeg pid %d)", self._display, path, proc.pid)

    def end(self) -> bytes:
        """Stop ffmpeg cleanly (SIGINT finishes the mp4) and return the file's bytes."""
        with self._lock:
            if self._proc is None or self._path is None:
                raise RecordingStateError("no recording is running; start one first")
            proc, path = self._proc, self._path
            self._proc = self._path = None
            deadline = time.monotonic() + FIRST_FRAME_TIMEOUT_S
            while not path.exists() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            self._stop(proc)
            try:
                data = path.read_bytes()
            except OSError as e:
                raise RecordingFailed(f"ffmpeg wrote no file: {e}") from None
            finally:
                path.unlink(missing_ok=True)
            if not data:
                raise RecordingFailed("ffmpeg wrote an empty file (recording too short?)")
            return data

    def abort(self) -> None:
        """Stop any running recording and discard it (desktop reset, shutdown)."""
        with self._lock:
            if self._proc is not None:
                self._stop(self._proc)
                if self._path is not None:
                    self._path.unlink(missing_ok=True)
            self._proc = self._path = None

    def _stop(self, proc: subprocess.Popen) -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                log.warning("ffmpeg ignored SIGINT for %.0f s; killing it", STOP_TIMEOUT_S)
                proc.kill()
                proc.wait(timeout=5)
        self._registry.reap()
