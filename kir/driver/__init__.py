"""The wiring layer: loading a file (frontend or IR parser, with its spec), running a loaded
kernel on a target (interpreter, emulator, MLX), and checking rules over kernels. The only
core package that imports the frontend, the backends and the interpreter together."""
