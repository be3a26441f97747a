"""Where torch runs: the device a stage resolves, whether a model fits its memory (device.py), and
how many threads torch's CPU kernels take, measured under the machine's load (threads.py). It
depends on gptkit.shared alone; the model, train, sample and eval stages use it."""
