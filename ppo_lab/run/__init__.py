"""The host side of one run: build, resume, the chunk loop, recorders, checkpoints, evaluation."""
