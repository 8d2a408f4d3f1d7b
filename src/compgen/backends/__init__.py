"""The backends of :func:`compgen.dispatch.train_or_load` that train outside the calling process.

* ``"workers"``: worker processes on this machine, by default one per CPU core (:mod:`compgen.backends.workers`);
* ``"ray"``: one Ray task per config on a Ray cluster (:mod:`compgen.backends.ray`).

The two others run in the calling process: ``"local"``, one config after another
(:func:`compgen.runner.train_and_store`), and ``"devices"``, one thread per local device
(:func:`compgen.devices.train_on_devices`).
"""

# Nothing is imported here: ``python -m compgen.backends.workers`` runs that module as ``__main__`` after importing
# this package, and an import of it here would load it a second time.
