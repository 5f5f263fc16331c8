"""The turn's background steps (Shadow, the specialists, Synth) and the gates on their replies."""
