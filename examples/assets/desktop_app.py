"""A small Tk form for the desktop sandbox's demos and tests: what an agent clicks and types lands in a log.

    python examples/assets/desktop_app.py [--log events.jsonl] [--title "Toolpath Form"] [--at 100,80]

The window sits at a fixed place (--at, default 100,80 screen pixels) so tasks know where things are. With
--log, every event is appended as one JSON line, flushed at once, so a test can read what landed:

    {"event": "ready", "window": [x1, y1, x2, y2], "widgets": {"entry": [x1, y1, x2, y2], "subscribe": …,
     "save": …, "cancel": …, "status": …, "items": …}}            screen pixels, once the window is drawn
    {"event": "click", "widget": "save", "x": 412, "y": 233, "button": 1}   every mouse press (screen pixels)
    {"event": "double", "widget": "entry", "x": …, "y": …}                   a double click
    {"event": "release", "widget": …, "x": …, "y": …, "button": 1}          every mouse release (ends a drag)
    {"event": "key", "widget": "entry", "keysym": "A", "char": "A"}          every key press
    {"event": "scroll", "widget": "items", "direction": "up" | "down"}      a wheel notch
    {"event": "subscribe", "value": true}                                   the checkbox toggled
    {"event": "save", "name": "…", "subscribe": true}                       the Save button pressed
    {"event": "cancel"}                                                     Cancel pressed (clears the form)
    {"event": "final", "name": "…", "subscribe": false}                     the program is closing

Ctrl+A selects all of the entry (as in most desktop programs; Tk's own binding moves to the line start).
"""

from __future__ import annotations

import argparse
import json
import signal
import tkinter as tk

WIDTH, HEIGHT = 480, 320


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log", help="append every event to this file as JSON lines")
    ap.add_argument("--title", default="Toolpath Form")
    ap.add_argument("--at", default="100,80", help="x,y of the window's top-left corner in screen pixels")
    opts = ap.parse_args(argv)
    x0, y0 = (int(v) for v in opts.at.split(","))

    def log(event: str, **fields) -> None:
        if opts.log:
            with open(opts.log, "a", encoding="utf-8") as f:
                f.write(json.dumps({"event": event, **fields}) + "\n")

    root = tk.Tk()
    root.title(opts.title)
    root.geometry(f"{WIDTH}x{HEIGHT}+{x0}+{y0}")
    root.resizable(False, False)

    tk.Label(root, text="Name:", font=("TkDefaultFont", 12)).place(x=20, y=20)
    entry = tk.Entry(root, width=30, font=("TkDefaultFont", 12))
    entry.place(x=90, y=20, width=360, height=30)
    subscribed = tk.BooleanVar(value=False)
    check = tk.Checkbutton(root, text="Subscribe", variable=subscribed, font=("TkDefaultFont", 12),
                           command=lambda: log("subscribe", value=subscribed.get()))
    check.place(x=90, y=65)
    status = tk.Label(root, text="Ready", font=("TkDefaultFont", 12), anchor="w")
    status.place(x=20, y=270, width=440, height=30)

    def save() -> None:
        status.config(text=f"Saved: {entry.get()}")
        log("save", name=entry.get(), subscribe=subscribed.get())

    def cancel() -> None:
        entry.delete(0, "end")
        subscribed.set(False)
        status.config(text="Cancelled")
        log("cancel")

    save_b = tk.Button(root, text="Save", font=("TkDefaultFont", 12), command=save)
    save_b.place(x=90, y=110, width=100, height=36)
    cancel_b = tk.Button(root, text="Cancel", font=("TkDefaultFont", 12), command=cancel)
    cancel_b.place(x=210, y=110, width=100, height=36)
    items = tk.Listbox(root, font=("TkDefaultFont", 11))
    for i in range(1, 51):
        items.insert("end", f"Item {i}")
    items.place(x=90, y=160, width=220, height=100)

    names = {str(entry): "entry", str(check): "subscribe", str(save_b): "save", str(cancel_b): "cancel",
             str(status): "status", str(items): "items", str(root): "window"}

    def name_of(widget) -> str:
        return names.get(str(widget), str(widget))

    def select_all(_event) -> str:
        entry.select_range(0, "end")
        entry.icursor("end")
        return "break"  # not Tk's emacs-style "go to line start"

    entry.bind("<Control-a>", select_all)
    root.bind_all("<ButtonPress>", lambda e: log("click", widget=name_of(e.widget), x=e.x_root, y=e.y_root,
                                                  button=e.num) if e.num in (1, 2, 3) else None, add="+")
    root.bind_all("<ButtonRelease>", lambda e: log("release", widget=name_of(e.widget), x=e.x_root, y=e.y_root,
                                                    button=e.num) if e.num in (1, 2, 3) else None, add="+")
    root.bind_all("<Double-Button-1>", lambda e: log("double", widget=name_of(e.widget), x=e.x_root, y=e.y_root),
                  add="+")
    root.bind_all("<KeyPress>", lambda e: log("key", widget=name_of(e.widget), keysym=e.keysym, char=e.char),
                  add="+")
    # X11 wheel notches are buttons 4 (up) and 5 (down).
    root.bind_all("<Button-4>", lambda e: log("scroll", widget=name_of(e.widget), direction="up"), add="+")
    root.bind_all("<Button-5>", lambda e: log("scroll", widget=name_of(e.widget), direction="down"), add="+")

    def box(w) -> list[int]:
        return [w.winfo_rootx(), w.winfo_rooty(), w.winfo_rootx() + w.winfo_width(),
                w.winfo_rooty() + w.winfo_height()]

    def ready() -> None:
        if not root.winfo_viewable():  # positions are final once the window is on screen
            root.after(50, ready)
            return
        root.update_idletasks()
        log("ready", window=box(root), widgets={n: box(w) for w, n in (
            (entry, "entry"), (check, "subscribe"), (save_b, "save"), (cancel_b, "cancel"), (status, "status"),
            (items, "items"))})

    closing = []

    def finish(*_args) -> None:
        if not closing:
            closing.append(True)
            log("final", name=entry.get(), subscribe=subscribed.get())
            root.destroy()

    root.protocol("WM_DELETE_WINDOW", finish)
    # A signal only reaches Python between Tk events: a short timer gives the handler a chance to run.
    signal.signal(signal.SIGTERM, lambda *_: root.after(0, finish))
    signal.signal(signal.SIGINT, lambda *_: root.after(0, finish))

    def tick() -> None:
        root.after(100, tick)

    root.after(100, tick)
    root.after(50, ready)
    entry.focus_set()
    root.mainloop()


if __name__ == "__main__":
    main()
