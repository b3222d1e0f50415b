from lazytensor.kernels import probe
