"""A fake OpenAI-compatible model server for tests and benchmarks: it injects faults and carries
load, and never decides what is fast or good. It runs standalone: nothing here imports Django."""
