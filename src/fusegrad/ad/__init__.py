"""The AD engine: tracer, tape, backward pass, pytrees."""
