"""GPU-free prediction: calibrate a device on a sample of layer configurations (``calibrate``, ``ops``)."""
