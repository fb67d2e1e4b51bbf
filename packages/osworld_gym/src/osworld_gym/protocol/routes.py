"""The guest server's HTTP surface: every route and header, named once for both sides.

OSWorld's guest protocol (``/screenshot``, ``/execute``, ``/setup/...``) is served as OSWorld's
own server serves it; our extensions live under ``/osworld_gym/``. The client
(:mod:`osworld_gym.client`) and the guest (:mod:`osworld_gym.guest`) both import these names,
so a route cannot be renamed on one side only.
"""

from __future__ import annotations

# -- OSWorld's routes --------------------------------------------------------------------------
SCREENSHOT = "/screenshot"
EXECUTE = "/execute"
EXECUTE_WITH_VERIFICATION = "/execute_with_verification"
SETUP_EXECUTE = "/setup/execute"
SETUP_EXECUTE_WITH_VERIFICATION = "/setup/execute_with_verification"
SETUP_LAUNCH = "/setup/launch"
SETUP_UPLOAD = "/setup/upload"
SETUP_OPEN_FILE = "/setup/open_file"
SETUP_ACTIVATE_WINDOW = "/setup/activate_window"
SETUP_CLOSE_WINDOW = "/setup/close_window"
FILE = "/file"
LIST_DIRECTORY = "/list_directory"
SCREEN_SIZE = "/screen_size"
CURSOR_POSITION = "/cursor_position"
PLATFORM = "/platform"
TERMINAL = "/terminal"
ACCESSIBILITY = "/accessibility"
DESKTOP_PATH = "/desktop_path"
START_RECORDING = "/start_recording"
END_RECORDING = "/end_recording"

# -- osworld-gym's extensions ------------------------------------------------------------------
PREFIX = "/osworld_gym"
ACTIONS = f"{PREFIX}/actions"
RAW_SCREENSHOT = f"{PREFIX}/screenshot"
RESET = f"{PREFIX}/reset"
HEALTH = f"{PREFIX}/health"

# -- limits ------------------------------------------------------------------------------------
#: Most bytes of stdout (and, separately, of stderr) a command run by ``/execute`` (and
#: ``/setup/execute``) may print: the guest reads both streams as they come, kills a command
#: that prints more and answers 413. Evaluator commands print a config value, a directory
#: listing, a file of a few KB; more is what the agent left (``cat`` of a huge file).
MAX_OUTPUT_BYTES = 8 << 20
#: Most bytes of any JSON answer the client reads (``/execute``'s two streams escaped as JSON,
#: the accessibility tree, ...): an answer over it is refused unread (GuestError 413).
MAX_ANSWER_BYTES = 128 << 20
#: The answer's status when a command's output, or an answer, is over its limit.
OUTPUT_TOO_LARGE = 413

# -- headers -----------------------------------------------------------------------------------
#: The token header OSWorld-compatible clients send (ours send ``Authorization: Bearer``).
TOKEN_HEADER = "X-OSWorld-Token"
#: A raw screenshot's size (its body is bare RGB bytes).
WIDTH_HEADER, HEIGHT_HEADER = "X-Width", "X-Height"
#: How long the guest took to capture and to encode a screenshot, in milliseconds.
CAPTURE_MS_HEADER, ENCODE_MS_HEADER = "X-Capture-Ms", "X-Encode-Ms"
#: The guest's count of task-app crashes so far (on raw screenshots).
CRASHES_HEADER = "X-Crashes"
#: The settle wait's facts (JSON) and what kept it going (a trace), on settled screenshots.
SETTLE_HEADER, SETTLE_WHY_HEADER = "X-Settle", "X-Settle-Why"
