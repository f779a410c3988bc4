"""The window (Qt only): it talks to ``workbench.session.Session`` and nothing else of the engine.

``qt_async`` owns qasync (loop, tasks started from slots, the error hook, dialogs awaited as futures);
``bridge`` turns engine events into Qt signals; ``main_window`` holds the threads list, the transcript,
the input box and the docks other panels plug into; ``decision_dialogs`` asks what suspended runs wait for.
"""
