"""``python -m janus.ops``: builds (or finds in the cache) janus's C++ ops and loads them."""

from janus.ops import build

if __name__ == "__main__":
    module = build.load()
    print(f"janus ops ready: janus_assert={module.janus_assert.__name__}")
