"""Tests against the real embedded engine (vLLM CPU with SmolLM2): minutes on a CPU."""
