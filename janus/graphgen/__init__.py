"""Graph generator: converts a function's AST into a specialised TensorFlow graph."""
