#!/usr/bin/python3
"""A minimal WebKitGTK browser for the WebKit tests, driven by WebKitWebDriver.

MiniBrowser (the browser WebKitWebDriver starts by default) runs automation sessions with an
ephemeral data manager, so nothing survives a restart. This one keeps IndexedDB,
localStorage and the rest in `--data-dir=DIR`, which is what the restart tests need. It uses
the stock WebKitGTK library through PyGObject (Debian's gir1.2-webkit2-4.1 and python3-gi),
and draws into GTK's Broadway backend, so no X server is needed.

WebKitWebDriver starts it as `webkit-browser.py --automation [--data-dir=DIR]` with the
inspector address in the environment; WebKit itself connects to it once automation is
allowed on the web context.
"""
import signal
import sys

import gi

gi.require_version("Gtk", "3.0")
gi.require_version("WebKit2", "4.1")
from gi.repository import Gdk, GLib, Gtk, WebKit2  # noqa: E402

NAME = "UserMemoryWebKit"


def data_dir():
    for arg in sys.argv[1:]:
        if arg.startswith("--data-dir="):
            return arg.split("=", 1)[1]
    sys.exit("webkit-browser.py needs --data-dir=DIR")


def main():
    GLib.set_prgname(NAME)
    Gtk.init(None)
    # Broadway reports no screen resolution (-1), which WebKit multiplies into a negative
    # viewport (innerWidth -122880): give it the usual 96 dpi.
    Gdk.Screen.get_default().set_resolution(96)
    base = data_dir()
    manager = WebKit2.WebsiteDataManager(base_data_directory=base, base_cache_directory=base + "/cache")
    context = WebKit2.WebContext(website_data_manager=manager)
    context.set_automation_allowed(True)
    loop = GLib.MainLoop()

    def new_view(related=None):
        # Every view of a session shares the context (and so the data); each gets its own
        # window, so no page is a hidden background tab with throttled timers.
        if related is None:
            view = WebKit2.WebView(web_context=context, is_controlled_by_automation=True)
        else:
            view = WebKit2.WebView(related_view=related, is_controlled_by_automation=True)
        window = Gtk.Window()
        window.set_default_size(1280, 900)
        window.add(view)
        view.connect("close", lambda _view: window.destroy())
        view.connect("create", lambda parent, _action: new_view(parent))
        window.show_all()
        return view

    def on_automation(_context, session):
        info = WebKit2.ApplicationInfo()
        info.set_name(NAME)
        info.set_version(WebKit2.get_major_version(), WebKit2.get_minor_version(), WebKit2.get_micro_version())
        session.set_application_info(info)
        session.connect("create-web-view", lambda _session: new_view())

    context.connect("automation-started", on_automation)
    # WebKitWebDriver ends the browser with SIGTERM when the session is deleted: quit the
    # main loop so WebKit's network process writes what it still holds and exits cleanly.
    GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGTERM, lambda: loop.quit() or False)
    loop.run()


if __name__ == "__main__":
    main()
