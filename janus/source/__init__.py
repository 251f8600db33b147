"""What janus knows about code before converting it: library versus user code, and purity."""
