"""The pixel family's desktop app: coloured buttons on a 640x360 canvas, clicks recorded.

This file runs *inside* the desktop with the system ``python3 -I`` (stdlib and tkinter only;
it imports nothing of osworld_gym). A task's setup writes it into the desktop and launches it::

    python3 -I app.py --port 7531 --layout '{"canvas": [640, 360], "buttons": [...], ...}'

It draws an undecorated window over the screen's top-left 640x360 pixels, then records every
left-button press on a live widget: a button's name (the button then turns grey and ignores
further clicks), ``menu`` when the menu button opens its panel, an item's name when one is chosen
(the panel then closes). Only the mouse counts: nothing takes keyboard focus.

The judge reads the record over HTTP on 127.0.0.1 (``GET /state`` answers ``events: red blue``
and a newline; ``GET /ready`` answers once the window is drawn). The guest only lets an evaluator
read a port whose listener the judge trusts (this app, launched by setup), so a program the
agent starts cannot answer in its place, and the server takes no input. The process makes
itself non-dumpable, so the agent (same uid) cannot ptrace it or write its memory, and deletes
Tk's ``send``, through which any X client could run Tcl inside it.
"""

import argparse
import ctypes
import http.server
import json
import threading
import time
import tkinter

PR_SET_DUMPABLE = 4


class Board:
    """The window, its widgets and the record of clicks."""

    def __init__(self, root, layout):
        self.root = root
        self.layout = layout
        self.events = []
        self.lock = threading.Lock()
        self.spent = set()
        self.menu_open = False
        w, h = layout["canvas"]
        root.overrideredirect(True)
        root.geometry(f"{w}x{h}+0+0")
        root.configure(background=layout["background"], cursor="left_ptr")
        self.canvas = tkinter.Canvas(
            root, width=w, height=h, background=layout["background"], highlightthickness=0
        )
        self.canvas.place(x=0, y=0)
        self.shapes = {}
        for b in layout["buttons"]:
            self.shapes[b["name"]] = self.draw(b)
        self.panel_shapes = []
        self.canvas.bind("<ButtonPress-1>", self.press)

    def draw(self, b, tag=""):
        rect = self.canvas.create_rectangle(
            b["x"], b["y"], b["x"] + b["w"] - 1, b["y"] + b["h"] - 1,
            fill=b["fill"], outline="", tags=tag,
        )  # fmt: skip
        text = self.canvas.create_text(
            b["x"] + b["w"] // 2, b["y"] + b["h"] // 2, text=b["label"],
            fill=_ink(b["fill"]), font=("DejaVu Sans", 12, "bold"), tags=tag,
        )  # fmt: skip
        return rect, text

    @staticmethod
    def inside(b, x, y):
        return b["x"] <= x < b["x"] + b["w"] and b["y"] <= y < b["y"] + b["h"]

    def record(self, name):
        with self.lock:
            self.events.append(name)

    def press(self, event):
        if self.menu_open:
            for item in self.layout["items"]:
                if self.inside(item, event.x, event.y):
                    self.record(item["name"])
                    self.close_menu()
                    return
        for b in self.layout["buttons"]:
            if b["name"] in self.spent or not self.inside(b, event.x, event.y):
                continue
            if b["name"] == "menu" and self.layout["items"]:
                if not self.menu_open:
                    self.record("menu")
                    self.open_menu()
                return
            self.record(b["name"])
            self.spend(b["name"])
            return

    def spend(self, name):
        self.spent.add(name)
        rect, text = self.shapes[name]
        self.canvas.itemconfigure(rect, fill=self.layout["spent"])
        self.canvas.itemconfigure(text, fill="#adb5bd")

    def open_menu(self):
        self.menu_open = True
        x, y, w, h = self.layout["panel"]
        self.canvas.create_rectangle(
            x, y, x + w - 1, y + h - 1, fill=self.layout["panel_fill"], outline="", tags="panel"
        )
        for item in self.layout["items"]:
            self.draw(item, tag="panel")

    def close_menu(self):
        self.menu_open = False
        self.canvas.delete("panel")
        self.spend("menu")

    def state(self):
        with self.lock:
            return "events:" + "".join(" " + e for e in self.events) + "\n"


def _ink(fill):
    r, g, b = (int(fill[i : i + 2], 16) for i in (1, 3, 5))
    return "#111111" if 0.299 * r + 0.587 * g + 0.114 * b > 150 else "#ffffff"


def serve(board, port):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path == "/state":
                body = board.state().encode()
            elif self.path == "/ready":
                body = b"ready\n"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--layout", required=True)
    args = parser.parse_args()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    root = tkinter.Tk(className="pixels")
    # Tk's `send` lets any X client run Tcl in this interpreter (`load` a library, `exec`): deleting
    # the command also unregisters the app, so no incoming send finds it
    root.tk.call("rename", "send", "")
    board = Board(root, json.loads(args.layout))
    root.lift()
    while not root.winfo_viewable():  # mapped and drawn before the judge hears "ready"
        root.update()
        time.sleep(0.01)
    root.update()
    serve(board, args.port)
    root.mainloop()


if __name__ == "__main__":
    main()
